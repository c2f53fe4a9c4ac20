"""The Hazards port: a no-op in production; in a simulation, BUGGIFY sites and risky points
where ``process.crash_at`` crashes the calling node and buggified points delay it."""

from __future__ import annotations

from pathlib import Path

import trio

import kelpie_dst
from kelpie_agent.ports import NO_HAZARDS, system_ports
from kelpie_dst import Fault
from kelpie_dst.shims import sim_ports


def test_production_hazards_never_fire_and_never_wait() -> None:
    assert system_ports().hazards is NO_HAZARDS
    assert not NO_HAZARDS.buggify("agent.x", 1.0)

    async def main() -> None:
        coro = NO_HAZARDS.point("agent.x")
        try:
            coro.send(None)  # returns at once: no checkpoint, no scheduling
        except StopIteration:
            return
        raise AssertionError("NoHazards.point awaited something")

    trio.run(main)


def _crashing_program(reached: list[str]) -> object:
    async def main(sim: kelpie_dst.Simulation) -> None:
        async def server(node: kelpie_dst.Node) -> None:
            hazards = sim_ports(node).hazards
            reached.append(f"boot {node.incarnation}")
            await hazards.point("agent.turn_committed")
            reached.append("after the point")
            await trio.sleep_forever()

        sim.add_node("server", server)
        await trio.sleep(30)

    return main


def test_crash_at_a_point_crashes_the_node_right_there_and_restarts_it(tmp_path: Path) -> None:
    reached: list[str] = []
    crash_at = Fault("process.crash_at", 1.0, end=5.0, params=(("restart_after", 2.0),))
    path = tmp_path / "run.trace"
    result = kelpie_dst.run(_crashing_program(reached), seed=3, faults=[crash_at], trace_file=path)
    assert result.ok, result.failure
    # booted, crashed at the point (never past it), restarted 2 s later; the window ended
    # before the third boot's point, so that one went on
    assert reached[:2] == ["boot 1", "boot 2"] and "after the point" in reached
    assert reached.index("after the point") == len(reached) - 1
    faults = [e for e in kelpie_dst.load_trace(path).events if e.kind == "fault"]
    assert faults and all(e.fields["site"] == "agent.turn_committed" for e in faults)
    boots = sum(1 for r in reached if r.startswith("boot"))
    assert result.faults_fired["process.crash_at"] == boots - 1 == len(faults)


def test_crash_at_respects_its_targets() -> None:
    reached: list[str] = []
    elsewhere = Fault("process.crash_at", 1.0, nodes=("other",))
    result = kelpie_dst.run(_crashing_program(reached), seed=3, faults=[elsewhere])
    assert result.ok and reached == ["boot 1", "after the point"]


def test_buggified_points_delay_and_buggify_is_decided_per_seed() -> None:
    """Over seeds, a point is sometimes delayed (a site is enabled for a quarter of the runs,
    then fires a quarter of the time), and the same seed always decides the same."""

    def delays(seed: int) -> tuple[float, ...]:
        waited: list[float] = []

        async def main(sim: kelpie_dst.Simulation) -> None:
            async def node_main(node: kelpie_dst.Node) -> None:
                hazards = sim_ports(node).hazards
                for _ in range(20):
                    start = trio.current_time()
                    await hazards.point("actors.renew")
                    waited.append(round(trio.current_time() - start, 6))

            sim.add_node("n", node_main)
            await trio.sleep(1000)

        assert kelpie_dst.run(main, seed=seed).ok
        return tuple(waited)

    runs = {seed: delays(seed) for seed in range(24)}
    assert delays(5) == runs[5]
    delayed = [seed for seed, w in runs.items() if any(w)]
    assert 1 <= len(delayed) < 24
    assert all(d == 0 or 0.01 <= d <= 12.0 for w in runs.values() for d in w)
