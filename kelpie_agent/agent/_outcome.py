"""What a tool call produced: its result, the writes to commit with it, what to apply after."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from kelpie_agent.storage import Transaction

__all__ = ["ToolOutcome", "TxnTool", "failure"]


@attrs.frozen
class ToolOutcome:
    """What a tool returned (``text``: its return value as text, or the error message), the
    writes to commit with its result (a value of None deletes the key), and what to apply to
    memory after that commit."""

    ok: bool
    text: str
    stdout: tuple[str, ...] | None = None
    stderr: tuple[str, ...] | None = None
    writes: tuple[tuple[bytes, bytes | None], ...] = ()
    after: tuple[Callable[[], None], ...] = attrs.field(default=(), eq=False)
    pause_minutes: int | None = None


TxnTool = Callable[[Transaction], Awaitable[ToolOutcome]]


def failure(tool: str, kind: str, message: str, **extra: Any) -> ToolOutcome:
    """A failed result in Letta's words: ``Error executing function <tool>: <kind>: <msg>``."""
    text = f"Error executing function {tool}: {kind}: {message}"
    return ToolOutcome(False, text[:1000], **extra)
