"""SimSandbox refuses what ProcessSandbox refuses, the same way: no isolation, no boot (the same
SandboxIsolationError); a command that grows the working area past ``disk_bytes`` ends with
``-SIGXFSZ`` and the same line on stderr; network allow-lists are checked the same."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import kelpie_dst
from kelpie_agent.sandbox import (
    ProcessSandbox,
    Sandbox,
    SandboxIsolationError,
    SandboxLimits,
    SandboxNetwork,
    SandboxState,
)
from kelpie_agent.sandbox._checks import ENTRY_COST
from kelpie_agent.sandbox._supervisor import ENTRY_COST as SUPERVISOR_ENTRY_COST
from kelpie_dst.shims import open_sandbox
from kelpie_dst.shims._sandbox import SimSandbox

LIMITS = SandboxLimits(disk_bytes=200_000, file_size_bytes=150_000)
FILL = "for i in 1 2 3; do head -c 100000 /dev/zero > f$i; done"
FILL_SIM = "printf '%s' {} > f1; printf '%s' {} > f2; printf '%s' {} > f3".format(
    *(["x" * 100_000] * 3)
)


def both(tmp_path: Path) -> list[tuple[str, Callable[..., Sandbox], dict[str, object]]]:
    return [
        ("process", lambda **kw: ProcessSandbox(LIMITS, parent_dir=tmp_path, **kw), {}),
        (
            "sim",
            lambda **kw: SimSandbox(LIMITS, **kw),
            {"clock": trio.testing.MockClock(autojump_threshold=0)},
        ),
    ]


def run(main: Callable[[], Awaitable[object]], **options: object) -> object:
    clock = options.get("clock")
    return trio.run(main, clock=clock) if clock is not None else trio.run(main)


@pytest.mark.bubblewrap
def test_no_isolation_no_boot_in_both(tmp_path: Path) -> None:
    messages = []
    missing = {"process": {"bwrap": str(tmp_path / "missing")}, "sim": {"bubblewrap": False}}
    for kind, make, options in both(tmp_path):
        sandbox = make(**missing[kind])

        async def main(sandbox: Sandbox = sandbox) -> str:
            with pytest.raises(SandboxIsolationError) as caught:
                await sandbox.boot()
            assert sandbox.state is SandboxState.STOPPED
            return str(caught.value)

        messages.append(run(main, **options))
    process, sim = messages
    assert sim == str(process).replace("ProcessSandbox", "SimSandbox").replace(
        f"bubblewrap {tmp_path / 'missing'} is not an executable",
        "bubblewrap (bwrap) is not installed",
    )
    assert "install bubblewrap" in sim and "--unsafe-sandbox" in sim


@pytest.mark.bubblewrap
def test_without_isolation_both_run(tmp_path: Path) -> None:
    for kind, make, options in both(tmp_path):
        extra = {"bwrap": "/nonexistent"} if kind == "process" else {"bubblewrap": False}
        sandbox = make(isolation="none", **extra)

        async def main(sandbox: Sandbox = sandbox) -> str:
            await sandbox.boot()
            try:
                return (await sandbox.exec("echo ran")).stdout
            finally:
                await sandbox.stop()

        assert run(main, **options) == "ran\n", kind


@pytest.mark.bubblewrap
def test_filling_the_disk_ends_the_same_way(tmp_path: Path) -> None:
    results = []
    for kind, make, options in both(tmp_path):
        sandbox = make()

        async def main(sandbox: Sandbox = sandbox, kind: str = kind) -> tuple[int, str, int]:
            await sandbox.boot()
            try:
                full = await sandbox.exec(FILL if kind == "process" else FILL_SIM)
                cleaned = await sandbox.exec("rm f1 f2 f3 2>/dev/null; rm -f f1 f2 f3")
                return full.exit_code, full.stderr.splitlines()[-1], cleaned.exit_code
            finally:
                await sandbox.stop()

        results.append(run(main, **options))
    process, sim = results
    assert process == sim
    assert process[0] == -signal.SIGXFSZ
    assert process[1] == (
        "sandbox: the working area grew past its disk limit of 200000 bytes; the command was killed"
    )
    assert ENTRY_COST == SUPERVISOR_ENTRY_COST


def test_the_simulated_sandbox_keeps_its_network_settings() -> None:
    async def main() -> None:
        network = SandboxNetwork(["api.example.com"])
        sandbox = open_sandbox(network=network, bubblewrap=False)
        assert sandbox.network.allows("api.example.com", 443)
        with pytest.raises(SandboxIsolationError):
            await sandbox.boot()

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.summary_line()


async def refusals_in_a_simulation() -> None:
    """A node without bubblewrap, and one whose command fills the disk (for the hash check)."""
    missing = open_sandbox(bubblewrap=False, name="no-bwrap")
    with pytest.raises(SandboxIsolationError):
        await missing.boot()
    sandbox = open_sandbox(limits=LIMITS, name="full", network=SandboxNetwork(["example.com"]))
    await sandbox.boot()
    result = await sandbox.exec(FILL_SIM)
    assert result.exit_code == -signal.SIGXFSZ
    await sandbox.exec("rm f1 f2 f3")
    await sandbox.stop()


def test_the_refusals_replay_exactly() -> None:
    kelpie_dst.assert_deterministic(refusals_in_a_simulation, seeds=range(3), runs=2)
