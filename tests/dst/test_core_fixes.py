"""Regression tests for simulator-core bugs: each failed before its fix."""

import subprocess
import sys
import textwrap

import pytest
import trio

import kelpie_dst
from kelpie_dst import FaultPlan, FaultSpec, NodeDownError
from kelpie_dst._faults import _REGISTRY, register_fault


def test_settle_works_without_trio_testing_imported_elsewhere() -> None:
    # pytest-trio imports trio.testing in this process, which hid the missing import.
    code = textwrap.dedent(
        """
        import kelpie_dst
        with kelpie_dst.open_simulation(seed=1) as handle:
            handle.settle()
        print("settled")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "settled"


class Disk:
    def __init__(self, node: kelpie_dst.Node) -> None:
        self.node = node

    async def write(self, key: str) -> None:
        self.node.check_alive()
        await trio.sleep(0.01)
        self.node.durable[key] = True


async def _server(node: kelpie_dst.Node) -> None:
    disk = Disk(node)

    async def flusher() -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await disk.write("flushed")  # NodeDownError on a crashed node

    node.start_soon(flusher)
    try:
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await disk.write("cleanup")


async def _crash_and_restart(sim: kelpie_dst.Simulation) -> tuple[int, str, list[str]]:
    node = sim.add_node("server", _server)
    await trio.sleep(1)
    sim.crash(node)
    sim.restart(node, after=1)
    await trio.sleep(2)
    absorbed = [e.fields["errors"] for e in sim.trace.tail if e.kind == "node.absorbed"]
    return node.incarnation, node.state.value, absorbed  # type: ignore[return-value]


def test_errors_from_a_crashed_nodes_finally_blocks_die_with_the_node() -> None:
    result = kelpie_dst.run(_crash_and_restart, seed=1)
    assert result.ok, result.failure and result.failure.describe()
    assert result.value == (2, "up", [["NodeDownError"]])
    again = kelpie_dst.run(_crash_and_restart, seed=1)
    assert again.trace_hash == result.trace_hash


def test_errors_on_a_live_node_still_crash_the_run() -> None:
    async def server(node: kelpie_dst.Node) -> None:
        await trio.sleep(1)
        raise NodeDownError("raised by the program itself while the node is up")

    async def main(sim: kelpie_dst.Simulation) -> None:
        sim.add_node("server", server)
        await trio.sleep(5)

    result = kelpie_dst.run(main, seed=1)
    assert result.failure is not None and result.failure.exit_code == 3
    assert "raised by the program itself" in result.failure.message


def test_registering_a_fault_type_never_moves_other_types_swarm_draws() -> None:
    plan = FaultPlan(swarm=True)
    before = {seed: plan.resolve(seed) for seed in range(30)}
    # "aaa" sorts before every other type, so with one shared stream it shifted all their draws.
    register_fault(FaultSpec("aaa.first", "a type registered late", swarm_range=(0.0, 0.5)))
    try:
        after = {seed: plan.resolve(seed) for seed in range(30)}
    finally:
        del _REGISTRY["aaa.first"]
    assert any(f.type == "aaa.first" for faults in after.values() for f in faults)
    for seed in before:
        assert tuple(f for f in after[seed] if f.type != "aaa.first") == before[seed]
    assert plan.resolve(7) == before[7]  # and the profiles are a pure function of the seed


async def _waiter() -> None:
    await trio.Event().wait()


def test_deadlock_report_in_stepping_mode_lists_only_user_tasks() -> None:
    with kelpie_dst.open_simulation(seed=1) as handle:
        handle.sim.add_node("host").start_soon(_waiter)
        with pytest.raises(kelpie_dst.LivenessError) as caught:
            handle.step(_waiter)
    report = caught.value.report
    assert "_stepping_root" not in report
    assert "kelpie_dst.node[" not in report  # the node wrappers hold nothing of the user's
    assert report.count("in _waiter: await trio.Event().wait()") == 2
    assert "kelpie_dst.step[1]' on node 'main'" in report
    assert "_waiter' on node 'host'" in report


def test_time_limit_report_leaves_out_the_nemeses() -> None:
    async def main(sim: kelpie_dst.Simulation) -> None:
        async def sleeper(node: kelpie_dst.Node) -> None:
            await trio.sleep(100)

        sim.add_node("worker", sleeper)
        await trio.sleep(100)

    faults = ["process.pause=0.01", "network.partition=0.01", "clock.jump=0.01"]
    result = kelpie_dst.run(main, seed=1, max_time=5, faults=faults)
    assert result.failure is not None and result.failure.exit_code == 2
    report = result.failure.details
    assert "nemesis" not in report
    assert "in sleeper: await trio.sleep(100)" in report
    assert "in main: await trio.sleep(100)" in report


def test_a_task_that_is_a_trio_function_itself_is_still_reported() -> None:
    async def main(sim: kelpie_dst.Simulation) -> None:
        sim.add_node("host").start_soon(trio.sleep_forever)
        await trio.Event().wait()

    result = kelpie_dst.run(main, seed=1)
    assert result.failure is not None
    assert "'trio.sleep_forever' on node 'host'" in result.failure.details


async def _crash_then_two_restarts(sim: kelpie_dst.Simulation) -> list[int]:
    node = sim.add_node("worker", lambda n: trio.sleep_forever())
    await trio.sleep(1)
    sim.crash(node)
    sim.restart(node, after=1)
    sim.restart(node, after=1)  # due at the same moment as the first
    await trio.sleep(2)
    return [node.incarnation, int(node.alive)]


def test_two_restarts_due_at_once_boot_the_node_once() -> None:
    result = kelpie_dst.run(_crash_then_two_restarts, seed=1)
    assert result.ok, result.failure
    assert result.value == [2, 1]


async def _crash_during_slow_cleanup(sim: kelpie_dst.Simulation) -> list[int]:
    async def program(node: kelpie_dst.Node) -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.5)  # cleanup that takes virtual time (as a lease release)

    node = sim.add_node("worker", program)
    await trio.sleep(1)
    sim.crash(node)
    sim.restart(node)  # at once: the crashed incarnation is still unwinding
    await trio.sleep(2)
    return [node.incarnation, int(node.alive)]


def test_a_restart_due_while_the_crashed_incarnation_unwinds_boots_it_after() -> None:
    # It was dropped: the node stayed down for good (CrashRules' restart_after=0.0 too).
    result = kelpie_dst.run(_crash_during_slow_cleanup, seed=1)
    assert result.ok, result.failure
    assert result.value == [2, 1]
