"""Every HTTP test checks that nothing ran in a thread (our routes must be async)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio.to_thread
import pytest
import trio


@pytest.fixture(autouse=True)
def no_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail the test if Starlette/FastAPI (or anything) used anyio's or trio's thread pool."""
    calls: list[str] = []

    def refuse(kind: str) -> Any:
        async def run_sync(func: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(f"{kind}({getattr(func, '__qualname__', func)!r})")
            raise AssertionError(f"{kind} was called for {func!r}: routes must be async")

        return run_sync

    monkeypatch.setattr(anyio.to_thread, "run_sync", refuse("anyio.to_thread.run_sync"))
    monkeypatch.setattr(trio.to_thread, "run_sync", refuse("trio.to_thread.run_sync"))
    yield calls
    assert calls == [], calls
