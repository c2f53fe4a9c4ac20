"""Simulated clusters for the actor-runtime tests: nodes sharing one database host, clients,
and the history they record for :mod:`tests.actors.checks`.

Topology (docs/storage.md): a ``db`` node holds one :class:`RecordingStore`; nodes ``n1..nN``
each run a :class:`Dispatcher` over their own ``FaultyKV`` handle on it, so storage faults,
partitions from ``db`` and crashes hit each node separately. Clients run on the ``main`` node
(which never crashes) and call the dispatcher of a node of their choice, as an HTTP client
would call a server; a client retries a retryable failure with the same request id.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.actors import ActorError, ActorId, Dispatcher, DispatcherOptions
from kelpie_agent.storage import ChecksumError, StorageError
from kelpie_dst import Fault, Node, Simulation
from kelpie_dst.shims import FaultyKV, SimKVStore, sim_ports

from ..timings import SHORT_LEASES
from .actors import Counter, Inc, Journal, Ledger, state_key, unpack

OPTIONS = SHORT_LEASES
MAX_SKEW = 1.0  # SHORT_LEASES's margin covers two nodes skewed by this much each


class RecordingStore(SimKVStore):
    """A SimKVStore that records every applied write, in commit order, with its virtual time.

    ``_apply`` is where a commit (or single write) becomes visible, synchronously, so the log
    order is the store's serialization order.
    """

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[float, list[tuple[bytes, bytes | None]]]] = []

    def _apply(self, writes: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.log.append((trio.current_time(), list(writes)))
        super()._apply(writes)


@attrs.define
class Cluster:
    sim: Simulation
    store: RecordingStore
    db: Node
    nodes: list[Node]
    journal: Journal

    def dispatcher(self, node: Node) -> Dispatcher | None:
        found = node.volatile.get("dispatcher") if node.alive else None
        return found if isinstance(found, Dispatcher) else None

    async def ready(self, node: Node) -> Dispatcher:
        """The node's dispatcher, once the node is up and its dispatcher runs."""
        while True:
            dispatcher = self.dispatcher(node)
            if dispatcher is not None:
                return dispatcher
            await trio.sleep(0.01)


def start_cluster(
    sim: Simulation,
    n_nodes: int = 3,
    *,
    options: DispatcherOptions = OPTIONS,
    factory: Callable[[ActorId, Journal], Any] | None = None,
) -> Cluster:
    db = sim.add_node("db")
    store = RecordingStore()
    journal = Journal()
    make = factory or (lambda aid, journal: Ledger(aid, journal))

    async def node_main(node: Node) -> None:
        kv = FaultyKV(sim, node, store, db)
        dispatcher = Dispatcher(
            kv,
            sim_ports(node),
            node_id=node.name,
            factories={
                "ledger": functools.partial(_make, make, journal),
                "counter": functools.partial(_make, Counter, journal),
            },
            options=options,
            observer=kelpie_dst.log,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(dispatcher.run)
            node.volatile["dispatcher"] = dispatcher

    nodes = [sim.add_node(f"n{i + 1}", node_main) for i in range(n_nodes)]
    return Cluster(sim, store, db, nodes, journal)


def _make(make: Callable[[ActorId, Journal], Any], journal: Journal, aid: ActorId) -> Any:
    return make(aid, journal)


def retryable(error: BaseException) -> bool:
    if isinstance(error, ActorError):
        return error.retryable
    # StorageError: the actor's write failed; ConnectionError: the node went down under it.
    return isinstance(error, StorageError | ConnectionError)


@attrs.define
class Clients:
    """Clients that send idempotent increments and record what was acknowledged."""

    cluster: Cluster
    actors: list[ActorId]
    issued: list[str] = attrs.field(factory=list)
    acked: list[tuple[str, str, int]] = attrs.field(factory=list)  # (actor, request, count)
    attempts: int = 0
    errors: dict[str, int] = attrs.field(factory=dict)
    fatal: list[str] = attrs.field(factory=list)

    async def client(self, cid: int, requests: int, think: float) -> None:
        sim = self.cluster.sim
        rng = sim.rng(f"test/client/{cid}")
        nodes = self.cluster.nodes
        home = nodes[cid % len(nodes)]
        for k in range(requests):
            await trio.sleep(think * rng.random())
            aid = self.actors[rng.randrange(len(self.actors))]
            request = f"c{cid}-{k}"
            self.issued.append(request)
            while True:
                node = home if rng.random() < 0.5 else nodes[rng.randrange(len(nodes))]
                dispatcher = self.cluster.dispatcher(node)
                if dispatcher is None:
                    await trio.sleep(0.5)
                    continue
                self.attempts += 1
                try:
                    count = await dispatcher.request(aid, Inc(request))
                except Exception as error:
                    name = type(error).__name__
                    self.errors[name] = self.errors.get(name, 0) + 1
                    if not retryable(error):
                        self.fatal.append(f"{request}: {error!r}")
                        return
                    await trio.sleep(0.2 + 0.3 * rng.random())
                    continue
                self.acked.append((str(aid), request, count))
                sim.log("test.acked", actor=str(aid), request=request, count=count)
                break


def final_states(cluster: Cluster, actors: Sequence[ActorId]) -> dict[str, Any]:
    """Each actor's stored state; for a value corrupted at rest (``storage.corruption``), the
    last value committed to it, from the commit log."""
    states: dict[str, Any] = {}
    for aid in actors:
        key = state_key(aid)
        try:
            states[str(aid)] = unpack(cluster.store._get(key))
        except ChecksumError:
            last = [v for _, writes in cluster.store.log for k, v in writes if k == key]
            states[str(aid)] = unpack(last[-1])
    return states


async def ledger_chaos(
    sim: Simulation,
    *,
    n_clients: int = 4,
    requests: int = 20,
    n_actors: int = 3,
    heal_at: float = 45.0,
    settle: float = 90.0,
    factory: Callable[[ActorId, Journal], Any] | None = None,
    require_liveness: bool = True,
) -> dict[str, Any]:
    """Clients increment a few Ledger actors on 3 nodes while faults fire; faults heal at
    ``heal_at``, and every client must be done within ``settle`` seconds after that (unless
    ``require_liveness`` is False: corrupted state cannot be recovered)."""
    cluster = start_cluster(sim, factory=factory)
    actors = [ActorId("ledger", f"a{i}") for i in range(n_actors)]
    clients = Clients(cluster, actors)
    async with trio.open_nursery() as nursery:
        for cid in range(n_clients):
            nursery.start_soon(clients.client, cid, requests, 2.0)
        await trio.sleep(heal_at)
        sim.heal()
        with trio.move_on_after(settle) as late:
            while len(clients.acked) + len(clients.fatal) < n_clients * requests:
                await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    if late.cancelled_caught and require_liveness:
        raise kelpie_dst.LivenessError(
            f"only {len(clients.acked)} of {n_clients * requests} increments were acknowledged "
            f"{settle}s after the faults healed"
        )
    return {
        "cluster": cluster,
        "clients": clients,
        "final": final_states(cluster, actors),
    }


def chaos_faults(*, pause: bool = False, jumps: bool = False) -> list[Fault]:
    """The fault mix of the single-activation tests (probabilities per decision)."""
    faults = [
        Fault("process.crash", 0.01, params=(("restart_after", 3.0),)),
        Fault("network.partition", 0.4, params=(("duration", 8.0),)),
        Fault("storage.write_fail", 0.05),
        Fault("storage.read_fail", 0.03),
        Fault("storage.latency", 0.1, params=(("max", 0.3),)),
        Fault("storage.unavailable", 0.02),
        Fault("storage.conflict", 0.05),
        Fault("storage.crash_after_write", 0.003),
        Fault("storage.crash_before_write", 0.003),
        Fault("clock.skew", 1.0, params=(("max_skew", MAX_SKEW),)),
    ]
    if pause:
        faults.append(Fault("process.pause", 0.02, params=(("duration", 8.0),)))
    if jumps:
        faults.append(Fault("clock.jump", 0.3, params=(("max_jump", 10.0),)))
    return faults


async def determinism_main(sim: Simulation) -> list[tuple[str, str, int]]:
    """A short chaos run for the same-seed and fresh-process comparisons (faults given as
    ``TYPE=P`` strings by the caller)."""
    result = await ledger_chaos(sim, n_clients=3, requests=6, heal_at=20.0, settle=60.0)
    acked: list[tuple[str, str, int]] = result["clients"].acked
    return acked
