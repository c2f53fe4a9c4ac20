"""open_simulation: a persistent simulation driven one step at a time."""

import time

import pytest
import trio

import kelpie_dst


def test_steps_return_values_and_raise_exceptions() -> None:
    async def double(x: int) -> int:
        await trio.sleep(1)
        return 2 * x

    async def fail() -> None:
        raise ValueError("bad step")

    with kelpie_dst.open_simulation(seed=1) as handle:
        assert handle.step(double, 21) == 42
        assert handle.time == 1
        with pytest.raises(ValueError, match="bad step"):
            handle.step(fail)
        assert handle.step(double, 1) == 2  # still usable after a failed step
        assert handle.time == 2


def test_virtual_time_is_frozen_between_steps() -> None:
    with kelpie_dst.open_simulation(seed=2) as handle:
        handle.advance(5)
        before = handle.time
        time.sleep(0.05)  # the host's real clock moves...
        assert handle.time == before == 5  # ...virtual time does not
        handle.advance(0.5)
        assert handle.time == 5.5


def test_background_tasks_progress_only_inside_steps() -> None:
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            await trio.sleep(1)
            ticks.append(trio.current_time())

    async def start(sim_node: kelpie_dst.Node) -> None:
        sim_node.start_soon(ticker)

    with kelpie_dst.open_simulation(seed=3) as handle:
        node = handle.sim.add_node("ticker")
        node.start_soon(ticker)
        handle.advance(3.5)
        assert ticks == [1.0, 2.0, 3.0]
        handle.settle()
        assert ticks == [1.0, 2.0, 3.0]  # settle runs what is due, without advancing time
        handle.advance(1)
        assert ticks[-1] == 4.0


def test_guards_are_on_only_inside_steps() -> None:
    async def wall() -> float:
        return time.time()

    with kelpie_dst.open_simulation(seed=4, epoch=1000.0) as handle:
        assert handle.step(wall) == 1000.0
        assert time.time() > 1_700_000_000  # the real clock between steps


def test_deadlock_in_a_step_raises_liveness_error_with_report() -> None:
    async def stuck() -> None:
        await trio.Event().wait()

    handle = kelpie_dst.open_simulation(seed=5)
    with pytest.raises(kelpie_dst.LivenessError, match="deadlock") as info:
        handle.step(stuck)
    assert "in stuck" in info.value.report
    assert handle.closed
    with pytest.raises(kelpie_dst.DstError, match="closed"):
        handle.step(trio.sleep, 1)


def test_crash_of_a_background_task_ends_the_simulation() -> None:
    async def bomb(_: kelpie_dst.Node) -> None:
        await trio.sleep(2)
        raise RuntimeError("background failure")

    handle = kelpie_dst.open_simulation(seed=6)
    handle.sim.add_node("bomber", bomb)
    with pytest.raises(kelpie_dst.SimulationCrashed) as info:
        handle.advance(10)
    assert "background failure" in repr(info.value.__cause__)
    assert handle.closed


def test_same_seed_same_trace_across_handles() -> None:
    async def work(sim: kelpie_dst.Simulation) -> None:
        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(lambda i=i: trio.sleep(sim.rng("w").random()))

    hashes = []
    for _ in range(2):
        with kelpie_dst.open_simulation(seed=7) as handle:
            handle.step(work, handle.sim)
            handle.advance(1)
            hashes.append(handle.trace_hash)
    assert hashes[0] == hashes[1]


def test_only_one_simulation_per_thread() -> None:
    with (
        kelpie_dst.open_simulation(seed=8),
        pytest.raises(kelpie_dst.DstError, match="already open"),
    ):
        kelpie_dst.open_simulation(seed=9)
    with kelpie_dst.open_simulation(seed=9) as again:  # fine once the first is closed
        again.advance(1)
