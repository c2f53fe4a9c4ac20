"""Per-node wall clocks: skew and jumps move time.time(), never trio's virtual time."""

import itertools
import time

import trio

import kelpie_dst


async def two_nodes(sim: kelpie_dst.Simulation) -> dict[str, list[float]]:
    readings: dict[str, list[float]] = {}

    async def reader(node: kelpie_dst.Node) -> None:
        for _ in range(10):
            readings.setdefault(node.name, []).append(time.time() - trio.current_time())
            await trio.sleep(5)

    sim.add_node("a", reader)
    sim.add_node("b", reader)
    await trio.sleep(60)
    return readings


def test_without_faults_every_node_reads_epoch_plus_virtual_time() -> None:
    readings = kelpie_dst.run(two_nodes, seed=1, epoch=1000.0).value
    assert isinstance(readings, dict)
    assert set(readings["a"]) == set(readings["b"]) == {1000.0}


def test_skew_gives_each_node_a_constant_offset() -> None:
    result = kelpie_dst.run(two_nodes, seed=2, epoch=1000.0, faults=["clock.skew=1"])
    readings = result.value
    assert isinstance(readings, dict)
    offsets = {name: {round(r - 1000.0, 9) for r in rs} for name, rs in readings.items()}
    assert all(len(o) == 1 for o in offsets.values())  # constant per node
    assert offsets["a"] != offsets["b"]
    assert all(abs(next(iter(o))) <= 5.0 for o in offsets.values())
    assert result.faults_fired["clock.skew"] == 3  # main, a and b each drew once


def test_jumps_can_move_wall_time_backwards() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[float]:
        readings = []

        async def reader(node: kelpie_dst.Node) -> None:
            for _ in range(200):
                readings.append(time.time())
                await trio.sleep(1)

        sim.add_node("a", reader)
        await trio.sleep(201)
        return readings

    result = kelpie_dst.run(main, seed=3, faults=["clock.jump=0.5"])
    readings = result.value
    assert isinstance(readings, list)
    steps = [b - a for a, b in itertools.pairwise(readings)]
    assert any(s < 0 for s in steps)  # went backwards at least once
    assert any(s > 1.5 for s in steps)  # and leapt ahead
    assert result.faults_fired["clock.jump"] > 0
    assert result.virtual_time == 201  # trio time is never skewed
