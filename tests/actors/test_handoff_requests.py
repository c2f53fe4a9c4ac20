"""Handoff requests (session 17, rtM): a node that gives up waiting for an actor withdraws its
own request, never another node's that targets the same holder (that node wrote it once and
would wait out its whole acquire timeout)."""

from __future__ import annotations

import pytest

import kelpie_dst
from kelpie_agent.actors import ActorId, Dispatcher
from kelpie_agent.actors._lease import WANTED, Owner, actor_key, decode_wanted
from kelpie_dst import Simulation
from kelpie_dst.shims import open_kv, sim_ports

from .actors import Counter, Journal
from .harness import OPTIONS

dst = pytest.mark.dst(seeds=2, guards="strict")
A = ActorId("counter", "a")


def _dispatcher(sim: Simulation, node_id: str) -> Dispatcher:
    node = sim.current_node()
    assert node is not None
    return Dispatcher(
        open_kv(node),
        sim_ports(node),
        node_id=node_id,
        factories={"counter": lambda aid: Counter(aid, Journal())},
        options=OPTIONS,
        observer=kelpie_dst.log,
    )


@dst
async def test_giving_up_withdraws_only_ones_own_handoff_request(dst: Simulation) -> None:
    holder = Owner("n1", "session-1", 3, "token-1")
    first, second = _dispatcher(dst, "n2"), _dispatcher(dst, "n3")
    assert await first.leases._want(A, holder) == "token-1"
    assert await second.leases._want(A, holder) == "token-1"  # the same holder, asked again
    await first.leases._withdraw(A, "token-1")  # n2 gives up
    kv = first.kv
    request = decode_wanted(await kv.get(actor_key(WANTED, A)))
    assert request is not None and request.node == "n3", "n3's request was removed by n2"
    await second.leases._withdraw(A, "token-1")
    assert await kv.get(actor_key(WANTED, A)) is None
