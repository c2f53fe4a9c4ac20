"""Actor contention: callers on every node keep sending to one actor through their own node,
so each node has a standing queue for it while the other nodes ask for it (handoffs).

Each node runs a :class:`~kelpie_agent.actors.Dispatcher` (the agent world's lease timings,
or ``renew_every`` and ``lease_margin`` if given) with one actor kind, a tally whose every
request takes ``work`` seconds and then counts itself once (idempotent by request id, in a
fenced transaction); with ``long_every`` N, every Nth request of a caller takes ``long_work``
seconds instead, longer than a lease, so the lease must be renewed under it. ``callers``
callers per node each send ``requests`` requests to the same actor through their node's
dispatcher, retrying a retryable failure with the same request id.

Invariants (:mod:`._contention_checks`): every request is acknowledged
(``contention_requests_complete``); no request waits longer than ``wait_leases`` lease
durations from issue to acknowledgement while the world is healthy
(``contention_waits_bounded``: a node that handed the actor over must not take it straight
back for its own queue, or the other nodes starve); the tally counts each request exactly once
and acknowledgements report distinct counts (``contention_tally_exact``); a request runs
more than once only after its caller was told its outcome is unknown
(``contention_at_most_once``: the runtime never re-delivers a request that started); and
activations of the tally take turns (``contention_one_activation``): each activation "touches"
a resource outside the store (as a tool call or an LLM request would) when a request starts and
after its work, and, with ``touch_every`` > 0, every that many seconds while it works. Once a
newer activation has touched it, an older one never does again (the holder stops using its
lease before anyone may take over), excused only where the runtime's documented assumption is
broken: a node paused in the last lease duration, or wall clocks skewed by faults.

With ``readers`` N, N readers per node send reads (:class:`Peek`) to that node's dispatcher
from outside it (the main node, which never pauses: as remote clients whose requests reach a
server), at exponential gaps of ``read_every`` seconds on average until the callers are done,
each without waiting for the ones before. The tally answers a read with the count it holds in
memory, which it loaded when it activated and keeps after each commit. Reads must be fresh
(``contention_reads_fresh``): a read answers at least every count acknowledged before it was
first issued. A node paused past its lease must not serve a read that arrived meanwhile from
memory when it thaws, since the other node may have counted by then; pauses are not excused.
A read in the handler's hands when the pause began may answer from memory at the thaw: it was
sent before the takeover, so it is concurrent with every count since (docs/decisions.md,
Dlead12-1).

With ``activate_work`` > 0 (session 16), every activation's ``activate`` works that many seconds
(touching the outside resource every ``touch_every`` seconds, or at its start and end) before it
serves, as an agent's activation does when it resumes a run a crash interrupted; longer than a
lease, so it is renewed under ``activate``. While renewals succeed, an activation must finish
activating and serve: an ``activate`` cut at the lease's first deadline (renewals that extend
only a handler's deadline, a renewal started only after ``activate``) fails every activation
the same way, and the requests never complete (``contention_requests_complete``, liveness).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import msgpack
import trio

import kelpie_dst
from kelpie_agent.actors import (
    ActorContext,
    ActorError,
    ActorId,
    ActorStoppedError,
    Dispatcher,
    LeaseLostError,
)
from kelpie_agent.actors._lease import LEASE, actor_key, decode_lease
from kelpie_agent.storage import ChecksumError, StorageError

from .._nodes import Node
from ..scenario import WorkloadContext, workload
from ..shims import open_kv, sim_ports
from ._agent_world import OPTIONS
from ._contention_checks import (
    Ack,
    Touch,
    contention_at_most_once,
    contention_lease_kept,
    contention_one_activation,
    contention_reads_fresh,
    contention_requests_complete,
    contention_tally_exact,
    contention_waits_bounded,
)
from ._lease_audit import audit_store
from ._lease_checks import handoffs_requested, lease_records_consistent, superseded_holders_stop

__all__ = [
    "actor_contention",
    "contention_at_most_once",
    "contention_lease_kept",
    "contention_one_activation",
    "contention_reads_fresh",
    "contention_requests_complete",
    "contention_tally_exact",
    "contention_waits_bounded",
    "handoffs_requested",
    "lease_records_consistent",
    "superseded_holders_stop",
]

TALLY = ActorId("tally", "t")
COUNT_KEY = b"contention/count"
DONE_PREFIX = b"contention/done/"


@attrs.frozen
class Work:
    request: str
    seconds: float


@attrs.frozen
class Peek:
    """A read: the count the tally holds in memory."""

    request: str


def _pack(value: Any) -> bytes:
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


class Tally:
    """Counts each request once: ``contention/done/<request>`` holds the count it got.
    ``executions`` counts how often each request was handed to an activation, and ``touches``
    logs when an activation acted outside the store (effects a fenced transaction cannot
    undo, as a tool call's or an LLM request's)."""

    def __init__(
        self,
        aid: ActorId,
        executions: dict[str, int],
        touches: list[Touch],
        touch_every: float = 0.0,
        reads: bool = False,
        activate_work: float = 0.0,
        lease_view: Callable[[], tuple[str | None, float | None] | None] | None = None,
    ) -> None:
        self.aid = aid
        self.ctx: ActorContext | None = None
        self.executions = executions
        self.touches = touches
        self.touch_every = touch_every
        self.reads = reads  # answer reads from memory (loaded on activation, kept on commit)
        self.activate_work = activate_work  # seconds each activate works before serving
        self.lease_view = lease_view  # the stored lease record (token, expiry), read at once
        self.count = 0  # with reads: the count as of this activation's last commit

    def _touch(self, request: str) -> None:
        assert self.ctx is not None
        stored = self.lease_view() if self.lease_view is not None else None
        wall = self.ctx.ports.clock.now() if stored is not None else None
        holder, expires = stored if stored is not None else (None, None)
        self.touches.append(
            Touch(
                trio.current_time(),
                self.ctx.node_id,
                self.ctx.activation_id,
                request,
                wall,
                holder,
                expires,
            )
        )

    async def activate(self, ctx: ActorContext) -> None:
        self.ctx = ctx
        if self.activate_work > 0:  # a resume: work outside the store, longer than a lease
            await self._busy("activate", self.activate_work)
        if self.reads:  # reads answer from memory: load it once the lease is held
            raw = await ctx.kv.get(COUNT_KEY)
            self.count = int(msgpack.unpackb(raw)) if raw is not None else 0

    async def handle(self, message: object) -> int:
        assert self.ctx is not None
        if isinstance(message, Peek):
            return self.count  # from memory, without a checkpoint (nothing to cancel it)
        assert isinstance(message, Work)
        if not self.reads:
            return await self._work(message)
        try:
            count = await self._work(message)
        except BaseException:
            self.ctx.invalidate()  # a commit that failed may have landed: reload next time
            raise
        self.count = max(self.count, count)
        return count

    async def _work(self, message: Work) -> int:
        assert self.ctx is not None
        self.executions[message.request] = self.executions.get(message.request, 0) + 1
        await self._busy(message.request, message.seconds)
        done = DONE_PREFIX + message.request.encode()
        async with self.ctx.transaction() as txn:
            earlier = await txn.get(done)
            if earlier is not None:
                return int(msgpack.unpackb(earlier))
            raw = await txn.get(COUNT_KEY)
            count = (int(msgpack.unpackb(raw)) if raw is not None else 0) + 1
            await txn.set(COUNT_KEY, _pack(count))
            await txn.set(done, _pack(count))
        return count

    async def _busy(self, request: str, seconds: float) -> None:
        """Work ``seconds`` outside the store, touching at the start, every ``touch_every``
        seconds (if set) and at the end."""
        self._touch(request)
        if self.touch_every > 0:
            end = trio.current_time() + seconds
            while trio.current_time() < end:
                await trio.sleep(min(self.touch_every, end - trio.current_time()))
                self._touch(request)
        else:
            await trio.sleep(seconds)
            self._touch(request)

    async def deactivate(self) -> None:
        await trio.lowlevel.checkpoint()


class _GaveUp(Exception):
    """The caller's patience ran out before its request was answered."""


async def _ask(dispatcher: Dispatcher, work: Work | Peek, patience: float) -> Any:
    """The tally's answer; with ``patience`` > 0 the caller gives up (:class:`_GaveUp`) after
    that many seconds, as a client whose own timeout fires does."""
    if not patience:
        return await dispatcher.request(TALLY, work)
    with trio.move_on_after(patience):
        return await dispatcher.request(TALLY, work)
    raise _GaveUp


def _unknown_outcome(error: BaseException) -> bool:
    """Errors that tell the caller its request may have run (the rest: it did not): the
    activation lost its lease or stopped while it ran, or the handler's own transaction met a
    storage error (a commit that failed or whose outcome is unknown)."""
    return isinstance(error, LeaseLostError | ActorStoppedError | StorageError)


def _retryable(error: BaseException) -> bool:
    if isinstance(error, ActorError):
        return error.retryable
    return isinstance(error, StorageError | ConnectionError)


@workload(
    params={
        "callers": 3,
        "requests": 20,
        "work": 0.25,
        "long_every": 0,
        "long_work": 8.0,
        "think": 0.0,
        "wait_leases": 2.0,
        "patience": 0.0,
        "touch_every": 0.0,
        "renew_every": 0.0,
        "lease_margin": 0.0,
        "readers": 0,
        "read_every": 1.0,
        "activate_work": 0.0,
    },
    sizes=("callers", "requests"),
    bounds={
        "callers": (1, 50),
        "requests": (1, 10_000),
        "work": (0, 10),
        "long_every": (0, 10_000),
        "long_work": (0, 60),
        "think": (0, 60),
        "wait_leases": (0.5, 100),
        "patience": (0, 600),
        "touch_every": (0, 60),
        "renew_every": (0, 60),
        "lease_margin": (0, 60),
        "readers": (0, 50),
        "read_every": (0.01, 60),
        "activate_work": (0, 60),
    },
)
async def actor_contention(ctx: WorkloadContext) -> None:
    sim = ctx.sim
    params = ctx.params
    names = ctx.topology.nodes or ("n1", "n2")
    db = sim.add_node(ctx.topology.database or "db")
    audit = audit_store(sim, db)  # instrumentation only: the run is the same without it
    acks: list[Ack] = []
    pending: dict[str, float] = {}  # request -> when it was first issued
    executions: dict[str, int] = {}  # request -> times an activation started it
    unknown: dict[str, int] = {}  # request -> unknown-outcome errors its caller got
    touches: list[Touch] = []  # activations acting outside the store, in time order
    reads: list[Ack] = []  # acknowledged reads (their count: what the tally answered)
    left = {f"{name}/{c}": params["requests"] for name in names for c in range(params["callers"])}
    options = attrs.evolve(
        OPTIONS,
        renew_every=params["renew_every"] or OPTIONS.renew_every,
        lease_margin=params["lease_margin"] or OPTIONS.lease_margin,
    )
    ctx.state.update(
        acks=acks,
        pending=pending,
        left=left,
        db=db,
        lease=options.lease_duration,
        executions=executions,
        unknown=unknown,
        touches=touches,
        reads=reads,
        margin=options.lease_margin,
        lease_audit=audit,
        actor=str(TALLY),
    )
    dispatchers: dict[str, Dispatcher] = {}  # each node's current dispatcher, for readers
    long_every = params["long_every"]
    finished = trio.Event()

    async def caller(node: Node, dispatcher: Dispatcher, who: str) -> None:
        rng = ctx.rng(f"contention/{who}")
        resent = f"{who}/{params['requests'] - left[who]}"
        if left[who] > 0 and resent in pending:
            # the node crashed while this caller waited for it: the caller's new incarnation
            # sends it again without knowing whether it ran
            unknown[resent] = unknown.get(resent, 0) + 1
        while left[who] > 0:
            number = params["requests"] - left[who]
            request = f"{who}/{number}"
            long = long_every > 0 and number % long_every == long_every - 1
            seconds = params["long_work"] if long else params["work"]
            issued = pending.setdefault(request, trio.current_time())
            before = executions.get(request, 0)
            try:
                count = await _ask(dispatcher, Work(request, seconds), params["patience"])
            except _GaveUp:
                # the caller stopped waiting: if no activation had started the request by
                # now, none ever may (Dispatcher.request); if one had, its outcome is unknown
                ctx.count("contention.gave_up")
                if executions.get(request, 0) != before:
                    unknown[request] = unknown.get(request, 0) + 1
                continue
            except Exception as error:
                ctx.count(f"contention.error.{type(error).__name__}")
                if _unknown_outcome(error):
                    unknown[request] = unknown.get(request, 0) + 1
                if not _retryable(error):
                    raise
                await trio.sleep(0.2 + 0.3 * rng.random())
                continue
            acks.append(Ack(request, node.name, issued, trio.current_time(), count))
            del pending[request]
            left[who] -= 1
            if params["think"]:
                await trio.sleep(params["think"] * rng.random())

    async def node_main(node: Node) -> None:
        kv = open_kv(node, host=db)

        def lease_view() -> tuple[str | None, float | None] | None:
            """The tally's lease record as stored now (None: unreadable), read at once."""
            try:
                raw = kv.store._get(actor_key(LEASE, TALLY))
            except ChecksumError:
                return None
            record = decode_lease(raw)
            return (None, None) if record is None else (record[0], record[2])

        dispatcher = Dispatcher(
            kv,
            sim_ports(node),
            node_id=node.name,
            factories={
                TALLY.kind: lambda aid: Tally(
                    aid,
                    executions,
                    touches,
                    params["touch_every"],
                    params["readers"] > 0,
                    params["activate_work"],
                    lease_view,
                )
            },
            options=options,
            observer=kelpie_dst.log if audit is None else audit.observer(node.name, kelpie_dst.log),
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(dispatcher.run)
            dispatchers[node.name] = dispatcher
            async with trio.open_nursery() as callers:
                for c in range(params["callers"]):
                    who = f"{node.name}/{c}"
                    if left[who] > 0:
                        callers.start_soon(caller, node, dispatcher, who)
            if all(n == 0 for n in left.values()):
                finished.set()
            await trio.sleep_forever()

    for name in names:
        sim.add_node(name, node_main)

    async def read(name: str, request: str, rng: Any) -> None:
        issued = trio.current_time()
        while not finished.is_set():
            dispatcher = dispatchers.get(name)
            try:
                if dispatcher is None:
                    raise ActorStoppedError(f"node {name} has not started")
                count = await dispatcher.request(TALLY, Peek(request))
            except Exception as error:
                ctx.count(f"contention.read_error.{type(error).__name__}")
                if not _retryable(error):
                    raise
                await trio.sleep(0.2 + 0.3 * rng.random())
                continue
            reads.append(Ack(request, name, issued, trio.current_time(), count))
            return

    async def reader(name: str, who: str) -> None:
        """Reads the tally through node ``name``'s dispatcher from the main node, as remote
        clients would, open loop: a read does not wait for the one before, so reads keep
        arriving while that node is paused, and wait for it to thaw."""
        rng = ctx.rng(f"contention/{who}")
        async with trio.open_nursery() as nursery:
            number = 0
            while not finished.is_set():
                # exponential gaps (a Poisson stream): some are long enough that the first
                # read a paused node finds on thawing was sent after the other node took over
                await trio.sleep(-params["read_every"] * math.log(1.0 - rng.random()))
                nursery.start_soon(read, name, f"{who}/{number}", rng)
                number += 1

    if params["readers"] > 0:
        async with trio.open_nursery() as nursery:
            for name in names:
                for r in range(params["readers"]):
                    nursery.start_soon(reader, name, f"read/{name}/{r}")
            await finished.wait()
            nursery.cancel_scope.cancel()
    else:
        await finished.wait()
    ctx.metric("contention.acks", len(acks))
    ctx.metric("contention.touches", len(touches))
    if params["readers"] > 0:
        ctx.metric("contention.reads", len(reads))
        ctx.metric(
            "contention.max_read_wait",
            round(max((r.acked - r.issued for r in reads), default=0.0), 3),
        )
    ctx.metric("contention.activations", len({t.activation for t in touches}))
    if audit is not None:  # what the lease-record audit judged (leaseR)
        for what in ("acquisitions", "renewals", "releases", "requests", "handoffs"):
            ctx.metric(f"lease.{what}", audit.counts.get(what, 0))
    waits = [a.acked - a.issued for a in acks]
    ctx.metric("contention.max_wait", round(max(waits, default=0.0), 3))
