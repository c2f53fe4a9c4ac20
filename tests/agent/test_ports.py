"""The clock, id and randomness ports: production shapes, and the simulator's seeded versions."""

import re

import trio

import kelpie_dst
from kelpie_agent.ports import SeededIds, SystemIds, system_ports, utc_datetime
from kelpie_dst.shims import sim_ports

ID = re.compile(r"^agent-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_ids_are_letta_shaped_version_4_uuids() -> None:
    import random

    assert ID.match(SystemIds().new("agent"))
    assert ID.match(SeededIds(random.Random(1)).new("agent"))
    assert SeededIds(random.Random(1)).new("x") == SeededIds(random.Random(1)).new("x")


def test_system_ports_read_the_host() -> None:
    ports = system_ports()
    assert ports.clock.now() > 1.7e9  # after 2023
    assert utc_datetime(ports.clock).tzinfo is not None


async def _ids_across_a_restart(sim: kelpie_dst.Simulation) -> list[str]:
    seen: list[str] = []

    async def server(node: kelpie_dst.Node) -> None:
        ports = sim_ports(node)
        seen.append(ports.ids.new("agent"))
        seen.append(f"{ports.clock.now():.3f}")
        await trio.sleep_forever()

    node = sim.add_node("server", server)
    await trio.sleep(1)
    sim.crash(node)
    await trio.sleep(1)
    sim.restart(node)
    await trio.sleep(1)
    return seen


def test_sim_ports_are_seeded_per_incarnation_and_use_the_node_clock() -> None:
    first = kelpie_dst.run(_ids_across_a_restart, seed=3)
    again = kelpie_dst.run(_ids_across_a_restart, seed=3)
    other = kelpie_dst.run(_ids_across_a_restart, seed=4)
    assert first.ok, first.failure
    ids = first.value[0::2]
    assert len(ids) == 2 and ids[0] != ids[1]  # a restarted node never repeats its ids
    assert all(ID.match(i) for i in ids)
    epoch = kelpie_dst.DEFAULT_EPOCH
    assert [float(t) - epoch for t in first.value[1::2]] == [0.0, 2.0]  # boot times, virtual
    assert first.value == again.value and first.trace_hash == again.trace_hash
    assert other.value[0] != first.value[0]
