"""Sandbox factories shared by the sandbox tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from kelpie_agent.sandbox import ProcessSandbox, Sandbox, SandboxLimits
from kelpie_dst.shims._sandbox_faults import open_sandbox

# Small enough that the limit checks stay cheap, large enough for every check's data.
SMALL = SandboxLimits(file_size_bytes=1 << 20, max_output_bytes=1 << 16)


async def make_sim() -> Sandbox:
    """A simulated sandbox on the calling node (inside a simulation)."""
    await trio.lowlevel.checkpoint()
    return open_sandbox(limits=SMALL)


@pytest.fixture
def make_process(tmp_path: Path) -> Callable[[], Awaitable[Sandbox]]:
    async def make() -> Sandbox:
        await trio.lowlevel.checkpoint()
        return ProcessSandbox(SMALL, parent_dir=tmp_path)

    return make
