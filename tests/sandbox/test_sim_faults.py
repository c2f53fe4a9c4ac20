"""SimSandbox under the sandbox faults: each fault's observable effect, a 100-seed workload
under all of them at once, node crashes, and determinism."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

import kelpie_dst
from kelpie_agent.sandbox import (
    CorruptSnapshotError,
    ExecTimeoutError,
    PauseError,
    RestoreError,
    SandboxBootError,
    SandboxCrashedError,
    SandboxError,
    SandboxState,
    SandboxStateError,
    SnapshotError,
)
from kelpie_dst.shims._sandbox import SimSandbox, SimTimings
from kelpie_dst.shims._sandbox_faults import FaultySandbox, open_sandbox

ALL_FAULTS = [
    "sandbox.boot_fail",
    "sandbox.crash",
    "sandbox.exec_timeout",
    "sandbox.pause_fail",
    "sandbox.snapshot_fail",
    "sandbox.snapshot_corrupt",
    "sandbox.restore_fail",
]
CHAOS = [f"{name}=0.15" for name in ALL_FAULTS]


def run_body(
    body: Callable[[FaultySandbox], Awaitable[Any]], *faults: str, seed: int = 1
) -> kelpie_dst.RunResult:
    async def main(sim: kelpie_dst.Simulation) -> Any:
        return await body(open_sandbox())

    return kelpie_dst.run(main, seed=seed, faults=list(faults))


def value(result: kelpie_dst.RunResult) -> Any:
    assert result.ok, result.failure
    return result.value


# -- one fault at a time -----------------------------------------------------------------------


def test_boot_fail_stops_the_sandbox() -> None:
    async def body(sb: FaultySandbox) -> tuple[str, SandboxState, float]:
        with pytest.raises(SandboxBootError, match=r"injected sandbox\.boot_fail") as caught:
            await sb.boot()
        with pytest.raises(SandboxStateError, match="boot failed"):
            await sb.exec("true")
        return type(caught.value).__name__, sb.state, trio.current_time()

    result = run_body(body, "sandbox.boot_fail=1")
    assert value(result) == ("SandboxBootError", SandboxState.STOPPED, 0.5)  # after boot time
    assert result.faults_fired == {"sandbox.boot_fail": 1}


def test_crash_fails_the_exec_and_stops_the_sandbox() -> None:
    async def body(sb: FaultySandbox) -> tuple[SandboxState, str, list[str]]:
        await sb.boot()
        with pytest.raises(SandboxCrashedError, match=r"injected sandbox\.crash"):
            await sb.exec("echo hi > f.txt")
        with pytest.raises(SandboxStateError) as later:
            await sb.read_file("f.txt")
        return sb.state, str(later.value), sorted(sb.fs.files)

    state, message, files = value(run_body(body, "sandbox.crash=1"))
    assert state is SandboxState.STOPPED
    assert "crashed: injected sandbox.crash" in message
    assert files == []  # the command never ran


def test_exec_timeout_takes_exactly_the_timeout_in_virtual_time() -> None:
    async def body(sb: FaultySandbox) -> tuple[float, float, SandboxState, list[str]]:
        await sb.boot()
        start = trio.current_time()
        with pytest.raises(ExecTimeoutError) as caught:
            await sb.exec("echo hi > f.txt", timeout=2.0)
        plain = trio.current_time() - start
        start = trio.current_time()
        async with trio.open_nursery() as nursery:  # pauses do not count against the timeout
            nursery.start_soon(_expect_timeout, sb, 2.0)
            await trio.sleep(1.0)
            await sb.pause()
            await trio.sleep(5.0)
            await sb.resume()
        assert caught.value.timeout == 2.0
        return plain, trio.current_time() - start, sb.state, sorted(sb.fs.files)

    plain, paused, state, files = value(run_body(body, "sandbox.exec_timeout=1"))
    assert plain == pytest.approx(2.0)
    # paused from the moment pause completed until resume completed
    assert paused == pytest.approx(2.0 + 5.0 + SimTimings().resume)
    assert (state, files) == (SandboxState.RUNNING, [])


async def _expect_timeout(sb: FaultySandbox, timeout: float) -> None:
    with pytest.raises(ExecTimeoutError):
        await sb.exec("true", timeout=timeout)


def test_pause_fail_leaves_it_running() -> None:
    async def body(sb: FaultySandbox) -> tuple[SandboxState, str]:
        await sb.boot()
        with pytest.raises(PauseError):
            await sb.pause()
        return sb.state, (await sb.exec("echo ok")).stdout

    assert value(run_body(body, "sandbox.pause_fail=1")) == (SandboxState.RUNNING, "ok\n")


def test_snapshot_fail_and_restore_fail_change_nothing() -> None:
    async def body(sb: FaultySandbox) -> list[object]:
        await sb.boot()
        await sb.write_file("a", b"1")
        seen: list[object] = []
        try:
            snap = await sb.snapshot()
        except SnapshotError:
            seen.append("snapshot failed")
            return seen
        await sb.write_file("a", b"2")
        with pytest.raises(RestoreError):
            await sb.restore(snap)
        seen.append(await sb.read_file("a"))
        return seen

    assert value(run_body(body, "sandbox.snapshot_fail=1")) == ["snapshot failed"]
    assert value(run_body(body, "sandbox.restore_fail=1")) == [b"2"]


def test_a_corrupted_snapshot_is_caught_on_restore() -> None:
    async def body(sb: FaultySandbox) -> tuple[bytes, bytes]:
        await sb.boot()
        await sb.write_file("a", b"original")
        snap = await sb.snapshot()  # succeeds, but one bit is flipped
        await sb.write_file("a", b"current")
        with pytest.raises(CorruptSnapshotError):
            await sb.restore(snap)
        return await sb.read_file("a"), snap

    corrupted = set()
    for seed in range(20):  # a different bit each seed, always caught
        content, snap = value(run_body(body, "sandbox.snapshot_corrupt=1", seed=seed))
        assert content == b"current"
        corrupted.add(snap)
    assert len(corrupted) > 15


def test_a_node_crash_crashes_its_sandboxes() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[SandboxState, str | None]:
        boxes: list[FaultySandbox] = []

        async def worker(node: kelpie_dst.Node) -> None:
            sb = open_sandbox(node, name="tools")
            boxes.append(sb)
            await sb.boot()
            await sb.exec("sleep 100")

        node = sim.add_node("worker", worker)
        await trio.sleep(5)
        sim.crash(node)
        await trio.sleep(1)
        with pytest.raises(SandboxStateError, match="'worker' crashed"):
            await boxes[0].exec("true")
        # a dead sandbox is not kept alive by its node
        assert not [h for h in node.crash_hooks if getattr(h, "__self__", None) is boxes[0]]
        return boxes[0].state, boxes[0]._life.crash_reason

    assert value(kelpie_dst.run(main, seed=3)) == (
        SandboxState.STOPPED,
        "its node 'worker' crashed",
    )


def test_open_sandbox_needs_a_simulation() -> None:
    with pytest.raises(kelpie_dst.UsageError, match="running simulation"):
        open_sandbox()


def test_sim_sandbox_runs_under_plain_trio_with_a_mock_clock() -> None:
    async def main() -> tuple[str, float]:
        sb = SimSandbox()
        await sb.boot()
        result = await sb.exec("sleep 20; echo woke")
        await sb.stop()
        return result.stdout, result.duration

    clock = trio.testing.MockClock(autojump_threshold=0)
    stdout, duration = trio.run(main, clock=clock)
    assert stdout == "woke\n"
    assert duration == pytest.approx(20.01)


# -- every fault at once, 100 seeds --------------------------------------------------------------


async def chaos_workload(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """Drive sandboxes through every operation under faults; check what each call promises."""
    outcomes: Counter[str] = Counter()
    rng = sim.rng("test/chaos")
    sb: FaultySandbox | None = None
    expected: dict[str, bytes] = {}
    snapshots: list[tuple[bytes, dict[str, bytes]]] = []
    for step in range(40):
        if sb is None or sb.state is SandboxState.STOPPED:
            sb, expected, snapshots = open_sandbox(name=f"box{step}"), {}, []
            try:
                await sb.boot()
            except SandboxBootError:
                assert sb.state is SandboxState.STOPPED
                outcomes["boot_fail"] += 1
                continue
        action = rng.choice(["write", "exec", "python", "pause", "snapshot", "restore"])
        try:
            if action == "write":
                name, data = f"f{rng.randrange(3)}", b"%d" % step
                await sb.write_file(name, data)
                expected[name] = data
            elif action in ("exec", "python"):
                name = f"f{rng.randrange(3)}"
                start = trio.current_time()
                try:
                    if action == "exec":
                        result = await sb.exec(f"printf {step} > {name}", timeout=1.0)
                    else:
                        code = f"open('{name}', 'w').write('{step}')"
                        result = await sb.exec_python(code, timeout=1.0)
                except ExecTimeoutError:
                    assert trio.current_time() - start == pytest.approx(1.0)
                    outcomes["timeout"] += 1
                    continue
                assert result.exit_code == 0, result
                expected[name] = b"%d" % step
            elif action == "pause":
                try:
                    await sb.pause()
                except PauseError:
                    assert sb.state is SandboxState.RUNNING
                    outcomes["pause_fail"] += 1
                    continue
                await trio.sleep(0.1)
                await sb.resume()
            elif action == "snapshot":
                snapshots.append((await sb.snapshot(), dict(expected)))
            elif snapshots:
                snap, contents = snapshots[rng.randrange(len(snapshots))]
                try:
                    await sb.restore(snap)
                except RestoreError as error:
                    kind = "corrupt" if isinstance(error, CorruptSnapshotError) else "restore_fail"
                    outcomes[kind] += 1
                else:
                    expected = dict(contents)
            outcomes[action] += 1
        except SandboxCrashedError:
            assert sb.state is SandboxState.STOPPED
            outcomes["crash"] += 1
            continue
        except SnapshotError:
            outcomes["snapshot_fail"] += 1
        listing = {name: await sb.read_file(name) for name in await sb.list_files()}
        assert listing == expected, (step, action)
    if sb is not None:
        await sb.stop()
    return dict(outcomes)


@pytest.mark.dst(seeds=100, faults=CHAOS)
async def test_sandbox_promises_hold_under_every_fault(dst: kelpie_dst.Simulation) -> None:
    outcomes = await chaos_workload(dst)
    assert sum(outcomes.values()) >= 30


def test_the_chaos_workload_meets_every_fault_over_100_seeds() -> None:
    fired: Counter[str] = Counter()
    for seed in range(100):
        result = kelpie_dst.run(chaos_workload, seed=seed, faults=CHAOS)
        assert result.ok, (seed, result.failure)
        fired.update(result.faults_fired)
    assert sorted(fired) == sorted(ALL_FAULTS)


def test_same_seed_same_trace() -> None:
    kelpie_dst.assert_deterministic(chaos_workload, seeds=range(5), faults=CHAOS)


def test_errors_are_all_sandbox_errors() -> None:
    for error in (SandboxBootError, SandboxCrashedError, ExecTimeoutError, PauseError):
        assert issubclass(error, SandboxError)
    assert issubclass(CorruptSnapshotError, RestoreError)
