"""A stale holder's write after its lease was taken over *and released* (coreJ, session 14).

The fence every state write goes through (``ActorContext.transaction``) reads the actor's owner
record in the transaction and refuses the write unless the record still names *this*
activation (docs/actors.md). A fence that asks the wrong question (is someone *else* holding
the lease?) lets a stale activation write once the lease it lost has been released again; no
other scenario makes that sequence, because it needs three things at once:

1. an activation on ``n1`` working on a long request while it still trusts its lease (its
   renewals succeed);
2. ``n2``'s wall clock far enough ahead that the lease looks expired to it (the runtime
   promises nothing about *when* a node takes over under such skew, but fencing must hold
   whatever the clocks say), so ``n2`` takes the actor over, serves a request and, with a short
   ``idle_timeout``, releases it again, all between two renewals of ``n1``;
3. ``n1``'s request then committing its write.

The workload makes exactly that, ``rounds`` times: on ``n1`` a request that works ``work``
seconds (2.3 to 2.8, drawn per round) and then counts itself in a fenced transaction; ``at``
seconds after it started (1.55 to 1.7: just after ``n1``'s first renewal at 1.5 s), a short
request through ``n2``, whose clock is ``skew`` seconds ahead (jumped once, by the workload).
Every request is retried by its caller with the same id until it is acknowledged (a request
counts itself once, by id).

The property (``writes_in_lease_order``): **no write of actor state commits after a write of a
newer activation** (epochs only grow, and fencing is what keeps a stale holder from writing).
Each counting transaction reads the highest epoch that has written and writes the larger of it
and its own, so a stale commit is seen inside the very transaction that makes it; and the
count equals the number of acknowledged requests, each acknowledged with its own count. With
a correct fence ``n1``'s write is refused (``LeaseLostError``, outcome unknown), its caller
retries, and a new activation counts it.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgpack
import trio

import kelpie_dst
from kelpie_agent.actors import ActorContext, ActorError, ActorId, Dispatcher
from kelpie_agent.storage import ConflictError

from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import open_direct_kv, open_kv, sim_ports
from ._agent_world import OPTIONS
from ._lease_audit import audit_store
from ._lease_checks import handoffs_requested, lease_records_consistent

__all__ = [
    "actor_fencing",
    "check_fencing",
    "handoffs_requested",
    "lease_records_consistent",
    "writes_in_lease_order",
]

COUNTER = ActorId("counter", "c")
COUNT = b"fencing/count"
EPOCH = b"fencing/epoch"  # the highest epoch that has committed a write
DONE = b"fencing/done/"


@attrs.frozen
class Bump:
    request: str
    seconds: float


@attrs.define
class FencingLog:
    started: dict[str, float] = attrs.Factory(dict)  # request -> when a handler first took it
    acks: dict[str, int] = attrs.Factory(dict)  # request -> the count it was acknowledged with
    stale: list[str] = attrs.Factory(list)  # commits after a newer activation's
    takeovers: int = 0  # rounds in which n2 served while n1's request worked
    refused: int = 0  # n1's requests whose write the fence refused (retried)
    final: int | None = None  # the count stored at the end


def _pack(value: Any) -> bytes:
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


def _unpack(raw: bytes | None) -> int:
    return int(msgpack.unpackb(raw)) if raw is not None else 0


class Counter:
    """Counts each request once (``fencing/done/<request>``), after working ``seconds``."""

    def __init__(self, log: FencingLog) -> None:
        self.log = log
        self.ctx: ActorContext | None = None

    async def activate(self, ctx: ActorContext) -> None:
        self.ctx = ctx

    async def handle(self, message: object) -> int:
        ctx = self.ctx
        assert ctx is not None and isinstance(message, Bump)
        self.log.started.setdefault(message.request, trio.current_time())
        await trio.sleep(message.seconds)
        done = DONE + message.request.encode()
        async with ctx.transaction() as txn:
            earlier = await txn.get(done)
            if earlier is not None:
                return _unpack(earlier)
            newest = _unpack(await txn.get(EPOCH))
            if newest > ctx.epoch:
                self.log.stale.append(
                    f"{message.request}: activation {ctx.epoch} on {ctx.node_id} committed a "
                    f"write after activation {newest} had"
                )
            count = _unpack(await txn.get(COUNT)) + 1
            await txn.set(EPOCH, _pack(max(newest, ctx.epoch)))
            await txn.set(COUNT, _pack(count))
            await txn.set(done, _pack(count))
        return count

    async def deactivate(self) -> None:
        await trio.lowlevel.checkpoint()


def check_fencing(log: FencingLog) -> list[str]:
    problems = list(log.stale)
    counts = sorted(log.acks.values())
    if counts != list(range(1, len(counts) + 1)):
        problems.append(f"acknowledged counts {counts} are not 1..{len(counts)}, once each")
    if log.final is not None and log.final != len(log.acks):
        problems.append(f"the stored count is {log.final}; {len(log.acks)} requests were acked")
    return problems


@workload(
    params={"rounds": 4, "skew": 10.0},
    bounds={"rounds": (1, 100), "skew": (0, 3600)},
)
async def actor_fencing(ctx: WorkloadContext) -> None:
    """A takeover and a release inside one renewal interval of a working holder; see the
    module docstring."""
    sim = ctx.sim
    log = FencingLog()
    ctx.state["fencing"] = log
    db = sim.add_node(ctx.topology.database or "db")
    audit = audit_store(sim, db)  # instrumentation only (leaseR): the run is the same
    ctx.state["lease_audit"] = audit
    dispatchers: dict[str, Dispatcher] = {}
    options = {
        "n1": OPTIONS,
        "n2": attrs.evolve(OPTIONS, idle_timeout=0.3),  # lets the actor go at once
    }

    def serve(name: str) -> Any:
        async def node_main(node: Node) -> None:
            dispatcher = Dispatcher(
                open_kv(node, host=db),
                sim_ports(node),
                node_id=node.name,
                factories={"counter": lambda _: Counter(log)},
                options=options[name],
                observer=kelpie_dst.log if audit is None else audit.observer(name, kelpie_dst.log),
            )
            async with trio.open_nursery() as nursery:
                await nursery.start(dispatcher.run)
                dispatchers[name] = dispatcher
                await trio.sleep_forever()

        return node_main

    nodes = {name: sim.add_node(name, serve(name)) for name in ("n1", "n2")}
    while len(dispatchers) < 2:
        await trio.sleep(0.1)
    nodes["n2"].clock.jump(float(ctx.params["skew"]))
    rng = ctx.rng("fencing")

    async def until_acked(node: str, bump: Bump) -> None:
        while True:
            try:
                log.acks[bump.request] = await dispatchers[node].request(COUNTER, bump)
                return
            except (ActorError, ConflictError):  # a lost lease (outcome unknown), or the fence's
                # read of the owner record conflicting with the takeover (rolled back): again
                if node == "n1":
                    log.refused += 1
                await trio.sleep(0.2)

    for r in range(int(ctx.params["rounds"])):
        work, at = rng.uniform(2.3, 2.8), rng.uniform(1.55, 1.7)
        long, short = Bump(f"n1/{r}", work), Bump(f"n2/{r}", 0.1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(until_acked, "n1", long)
            while long.request not in log.started:
                await trio.sleep(0.01)
            await trio.sleep_until(log.started[long.request] + at)
            await until_acked("n2", short)
            if trio.current_time() < log.started[long.request] + work:
                log.takeovers += 1  # n2 served while n1's request still worked
        await trio.sleep(5.0)  # idle: both activations let go before the next round
    main = sim.current_node()
    assert main is not None
    log.final = _unpack(await open_direct_kv(main, host=db).get(COUNT))
    ctx.metric("fencing.takeovers", log.takeovers)
    ctx.metric("fencing.refused", log.refused)
    ctx.metric("fencing.acks", len(log.acks))


@invariant
def writes_in_lease_order(ctx: WorkloadContext) -> None:
    """No write commits after a newer activation's; every acknowledged request counted once."""
    problems = check_fencing(ctx.state["fencing"])
    assert not problems, "; ".join(problems[:4])
