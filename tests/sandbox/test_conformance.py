"""The sandbox conformance suite against ProcessSandbox (real subprocesses) and SimSandbox
(in the simulator, over 100 seeds)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import kelpie_dst
from kelpie_agent.sandbox import Sandbox
from kelpie_agent.sandbox.testing import CHECKS, check_sandbox_conformance, run_check

from .conftest import make_sim


@pytest.mark.trio
@pytest.mark.bubblewrap
@pytest.mark.parametrize("name", list(CHECKS))
async def test_process_sandbox(name: str, make_process: Callable[[], Awaitable[Sandbox]]) -> None:
    await run_check(name, make_process)


@pytest.mark.trio
@pytest.mark.bubblewrap
async def test_process_sandbox_leaves_no_directory_behind(
    make_process: Callable[[], Awaitable[Sandbox]], tmp_path: Path
) -> None:
    await run_check("snapshot_restore", make_process)
    await run_check("stop_during_exec", make_process)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.dst(seeds=100)
async def test_sim_sandbox(dst: kelpie_dst.Simulation) -> None:
    await check_sandbox_conformance(make_sim)
