"""Nodes: crash, restart, pause and resume; ports refuse I/O on a crashed node."""

import pytest
import trio

import kelpie_dst
from kelpie_dst import NodeDownError, NodeState


class Disk:
    """A toy port: writes go to the node's durable state, through check_alive()."""

    def __init__(self, node: kelpie_dst.Node) -> None:
        self.node = node

    async def write(self, key: str, value: int) -> None:
        self.node.check_alive()
        await trio.sleep(0.01)
        self.node.check_alive()
        self.node.durable[key] = value


def test_crash_cancels_tasks_and_ports_refuse_cleanup_writes() -> None:
    async def server(node: kelpie_dst.Node) -> None:
        disk = Disk(node)
        node.volatile["cache"] = "warm"
        try:
            for i in range(1000):
                await disk.write("counter", i)
                await trio.sleep(1)
        finally:
            with trio.CancelScope(shield=True), pytest.raises(NodeDownError):
                await disk.write("cleanup", 1)

    async def main(sim: kelpie_dst.Simulation) -> tuple[int, bool, str]:
        node = sim.add_node("server", server)
        await trio.sleep(5.5)
        sim.crash(node)
        await trio.sleep(0)
        return node.durable["counter"], "cleanup" in node.durable, node.state.value

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure
    assert result.value == (5, False, "down")


def test_restart_keeps_durable_state_and_resets_volatile() -> None:
    boots: list[tuple[int, dict[str, object], dict[str, object]]] = []

    async def server(node: kelpie_dst.Node) -> None:
        boots.append((node.incarnation, dict(node.durable), dict(node.volatile)))
        node.durable["boots"] = node.durable.get("boots", 0) + 1  # type: ignore[operator]
        node.volatile["scratch"] = True
        await trio.sleep_forever()

    async def main(sim: kelpie_dst.Simulation) -> None:
        node = sim.add_node("server", server)
        await trio.sleep(1)
        sim.crash(node)
        sim.restart(node, after=2)
        await trio.sleep(1)
        assert node.state is NodeState.DOWN
        await trio.sleep(1.5)
        assert node.state is NodeState.UP

    result = kelpie_dst.run(main, seed=2)
    assert result.ok, result.failure
    assert boots == [(1, {}, {}), (2, {"boots": 1}, {})]


def test_pause_freezes_a_node_exactly() -> None:
    ticks: list[float] = []

    async def ticker(node: kelpie_dst.Node) -> None:
        while True:
            await trio.sleep(1)
            ticks.append(trio.current_time())

    async def main(sim: kelpie_dst.Simulation) -> None:
        node = sim.add_node("ticker", ticker)
        await trio.sleep(2.5)
        sim.pause(node)
        await trio.sleep(3)
        assert ticks == [1.0, 2.0]  # frozen: nothing ran while paused
        sim.resume(node)
        await trio.sleep(0)
        await trio.sleep(0)
        assert ticks == [1.0, 2.0, 5.5]  # the overdue wakeup runs at once on resume
        await trio.sleep(1)
        assert ticks[-1] == 6.5

    result = kelpie_dst.run(main, seed=3)
    assert result.ok, result.failure


def test_a_node_remembers_when_it_was_paused() -> None:
    """``pause_spans`` and ``paused_between``: for checkers that excuse what a frozen process
    does when it thaws. A crash ends a pause as a resume does."""

    async def main(sim: kelpie_dst.Simulation) -> list[tuple[float, float]]:
        node = sim.add_node("n", lambda node: trio.sleep_forever())
        await trio.sleep(1)
        sim.pause(node)
        await trio.sleep(2)
        assert node.paused_between(2.5, 2.5) and not node.paused_between(0, 0.5)
        sim.resume(node)
        await trio.sleep(1)
        sim.pause(node)
        await trio.sleep(1)
        sim.crash(node)
        await trio.sleep(1)
        assert node.paused_between(0.0, 1.0) and node.paused_between(4.5, 9.0)
        assert not node.paused_between(3.1, 3.9) and not node.paused_between(5.1, 6.0)
        return node.pause_spans

    result = kelpie_dst.run(main, seed=5)
    assert result.ok, result.failure
    assert result.value == [(1.0, 3.0), (4.0, 5.0)]


def test_crash_while_paused_releases_and_cancels_the_tasks() -> None:
    finished: list[str] = []

    async def worker(node: kelpie_dst.Node) -> None:
        try:
            await trio.sleep(10)
        finally:
            finished.append("unwound")

    async def main(sim: kelpie_dst.Simulation) -> str:
        node = sim.add_node("w", worker)
        await trio.sleep(1)
        sim.pause(node)
        await trio.sleep(1)
        sim.crash(node)
        await trio.sleep(1)
        return node.state.value

    result = kelpie_dst.run(main, seed=4)
    assert result.ok, result.failure
    assert result.value == "down" and finished == ["unwound"]


def test_the_main_node_cannot_crash() -> None:
    async def main(sim: kelpie_dst.Simulation) -> None:
        sim.crash(sim.node("main"))

    result = kelpie_dst.run(main)
    assert result.failure is not None and "main node cannot crash" in result.failure.message


def test_lifecycle_events_are_traced() -> None:
    async def main(sim: kelpie_dst.Simulation) -> None:
        node = sim.add_node("n1", lambda node: trio.sleep_forever())
        await trio.sleep(1)
        sim.pause(node)
        sim.resume(node, after=1)
        await trio.sleep(2)
        sim.crash(node)
        sim.restart(node, after=1)
        await trio.sleep(2)

    import io

    from kelpie_dst._trace import decode_trace

    sink = io.BytesIO()
    result = kelpie_dst.run(main, trace_file=sink)
    assert result.ok, result.failure
    kinds = [(e.kind, e.fields.get("node")) for e in decode_trace(sink.getvalue())]
    lifecycle = [k for k in kinds if k[0].startswith("node.") and k[1] == "n1"]
    assert lifecycle == [
        ("node.start", "n1"),
        ("node.pause", "n1"),
        ("node.resume", "n1"),
        ("node.crash", "n1"),
        ("node.restart", "n1"),
        ("node.start", "n1"),
    ]


def test_process_crash_fault_crashes_and_restarts_nodes() -> None:
    from kelpie_dst.examples import bank

    crashed = 0
    for seed in range(10):
        result = kelpie_dst.run(bank.main, seed=seed, faults=["process.crash=0.3"])
        assert result.ok, (seed, result.failure)
        crashed += result.faults_fired.get("process.crash", 0)
    assert crashed > 0


def test_run_ending_while_a_node_is_paused_tears_down_cleanly() -> None:
    # Regression: cancelled tasks of a paused node used to be parked again by the scheduler,
    # so the end of the run deadlocked (found by the bank example, seed 3, crash+pause).
    async def sleeper(node: kelpie_dst.Node) -> None:
        await trio.sleep_forever()

    async def main(sim: kelpie_dst.Simulation) -> None:
        node = sim.add_node("sleepy", sleeper)
        await trio.sleep(1)
        sim.pause(node)
        sim.resume(node, after=100)
        await trio.sleep(1)  # main returns while "sleepy" is still paused

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure
    assert result.virtual_time == 2


def test_bank_invariants_hold_under_crashes_and_pauses() -> None:
    from kelpie_dst.examples import bank

    for seed in range(15):
        result = kelpie_dst.run(
            bank.main, seed=seed, faults=["process.crash=0.3", "process.pause=0.2"]
        )
        assert result.ok, (seed, result.failure)
