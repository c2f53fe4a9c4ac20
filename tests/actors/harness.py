"""A one-node dispatcher for tests that run inside the simulator (the ``dst`` fixture)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.actors import ActorId, Dispatcher, DispatcherOptions
from kelpie_agent.storage import KV
from kelpie_dst import Simulation
from kelpie_dst.shims import open_kv, sim_ports

from ..timings import SHORT_LEASES
from .actors import Counter, Journal

OPTIONS = attrs.evolve(SHORT_LEASES, idle_timeout=10.0)


@attrs.define
class Local:
    dispatcher: Dispatcher
    kv: KV
    journal: Journal
    nursery: trio.Nursery


@asynccontextmanager
async def local_dispatcher(
    sim: Simulation,
    *,
    options: DispatcherOptions = OPTIONS,
    factories: dict[str, Callable[[ActorId], Any]] | None = None,
    kv: KV | None = None,
    node_id: str = "n1",
) -> AsyncIterator[Local]:
    """A dispatcher running on the calling node (in the test's own task tree), with Counter
    actors of kind ``counter``; stopped (cancelled) on exit."""
    node = sim.current_node()
    assert node is not None
    journal = Journal()
    kv = kv if kv is not None else open_kv(node)
    dispatcher = Dispatcher(
        kv,
        sim_ports(node),
        node_id=node_id,
        factories=factories or {"counter": lambda aid: Counter(aid, journal)},
        options=options,
        observer=kelpie_dst.log,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(dispatcher.run)
        yield Local(dispatcher, kv, journal, nursery)
        nursery.cancel_scope.cancel()
