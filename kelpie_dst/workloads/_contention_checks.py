"""The invariants of the actor-contention workload (kept apart from the workload itself)."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import msgpack

from ..scenario import WorkloadContext, invariant
from ..shims import open_kv

__all__ = [
    "Ack",
    "Touch",
    "check_lease_kept",
    "contention_at_most_once",
    "contention_lease_kept",
    "contention_one_activation",
    "contention_reads_fresh",
    "contention_requests_complete",
    "contention_tally_exact",
    "contention_waits_bounded",
]


@attrs.frozen
class Ack:
    """One acknowledged request: who sent it, when it was first issued and acknowledged, and
    the count the tally answered."""

    request: str
    node: str
    issued: float
    acked: float
    count: int


@attrs.frozen
class Touch:
    """An activation acting outside the store at ``at`` (virtual seconds), for ``request``."""

    at: float
    node: str
    activation: str
    request: str
    # the acting node's wall clock, and the lease record in the store, at that instant (read
    # synchronously: no await, no draw); None where the workload did not record them
    wall: float | None = None
    holder: str | None = None  # the token the stored lease record names
    expires: float | None = None  # its expiry, in the wall clock of the node that wrote it


@invariant
def contention_requests_complete(ctx: WorkloadContext) -> None:
    """Every caller got every one of its requests acknowledged."""
    left = {who: n for who, n in ctx.state.get("left", {}).items() if n}
    waiting = sorted(ctx.state.get("pending", {}))
    assert not left, f"callers with requests never acknowledged: {left} (waiting: {waiting[:5]})"


@invariant
def contention_waits_bounded(ctx: WorkloadContext) -> None:
    """Bounded waiting: no request took longer than ``wait_leases`` lease durations from its
    first issue to its acknowledgement. The world is healthy and each request is short, so a
    longer wait means a node starved: the actor was bounced between the other nodes (or kept
    by one) while this node kept asking for it."""
    bound = ctx.params["wait_leases"] * ctx.state["lease"]
    slow = sorted(
        (a for a in ctx.state.get("acks", []) if a.acked - a.issued > bound),
        key=lambda a: a.issued - a.acked,
    )
    shown = "; ".join(
        f"{a.request} (on {a.node}) waited {a.acked - a.issued:.1f}s, from t={a.issued:.1f}"
        for a in slow[:3]
    )
    assert not slow, (
        f"{len(slow)} request(s) waited longer than {bound:g}s "
        f"({ctx.params['wait_leases']:g} lease durations) for the actor: {shown}"
    )


@invariant
def contention_tally_exact(ctx: WorkloadContext) -> None:
    """The stored tally equals the number of requests counted, each acknowledged request got
    its own count, and that count is the one stored for it (exactly once)."""
    store = open_kv(ctx.state["db"]).store
    acks = ctx.state.get("acks", [])
    raw = store._get(b"contention/count")
    total = int(msgpack.unpackb(raw)) if raw is not None else 0
    counts = [a.count for a in acks]
    assert len(set(counts)) == len(counts), (
        f"two acknowledged requests got the same count: "
        f"{sorted(c for c in set(counts) if counts.count(c) > 1)[:5]}"
    )
    wrong = []
    for a in acks:
        stored = store._get(b"contention/done/" + a.request.encode())
        if stored is None or int(msgpack.unpackb(stored)) != a.count:
            wrong.append(f"{a.request}: acknowledged {a.count}, stored {stored!r}")
    assert not wrong, f"acknowledged counts not stored: {'; '.join(wrong[:3])}"
    waiting = len(ctx.state.get("pending", {}))  # may have been counted, never acknowledged
    assert len(acks) <= total <= len(acks) + waiting, (
        f"the tally is {total}, but {len(acks)} requests were acknowledged "
        f"({waiting} still waiting)"
    )


@invariant
def contention_at_most_once(ctx: WorkloadContext) -> None:
    """A request is handed to an activation more than once only when its caller was told, as
    many times, that its outcome is unknown (the lease was lost or the node stopped while it
    ran): the runtime itself never sends a request that started again, since its effects
    outside the store (a tool call, a reply streamed) would happen twice unseen."""
    executions: dict[str, int] = ctx.state.get("executions", {})
    unknown: dict[str, int] = ctx.state.get("unknown", {})
    twice = [
        f"{request} ran {n} times, its caller was told of {unknown.get(request, 0)} unknown "
        "outcome(s)"
        for request, n in sorted(executions.items())
        if n > 1 + unknown.get(request, 0)
    ]
    assert not twice, f"requests run again without telling their callers: {'; '.join(twice[:3])}"


@invariant
def contention_one_activation(ctx: WorkloadContext) -> None:
    """Activations take turns: once a newer activation of the tally has acted outside the store,
    no older one acts again. The runtime promises it (docs/actors.md, "Clock skew"): a holder
    stops using its lease ``lease_margin`` before the expiry others read, so the next owner
    starts only after the last one stopped. Fencing keeps a stale holder's *writes* out, but not
    what it does elsewhere (a tool call, an LLM request), which this checks.

    The promise rests on wall clocks that agree within the margin and a process that runs: an
    act of a node paused within the last lease duration (it thaws past its deadline and runs up
    to its next checkpoint) is excused, and the check is off in a run whose clocks jump or are
    skewed apart by the margin or more (``clock.skew`` within it is the case it is made for)."""
    if "clock.jump" in ctx.sim.faults.active:
        return
    touches: list[Touch] = ctx.state.get("touches", [])
    acting = {t.node for t in touches}
    nodes = {node.name: node for node in ctx.sim.nodes}
    offsets = [node.clock.offset for name, node in nodes.items() if name in acting]
    if offsets and max(offsets) - min(offsets) >= ctx.state["margin"]:
        return
    lease: float = ctx.state["lease"]
    ended: dict[str, Touch] = {}  # activations that a newer one has followed -> its first act
    current: Touch | None = None  # the latest activation's first act
    late = []
    for touch in touches:
        if current is not None and touch.activation == current.activation:
            continue
        if touch.activation in ended:
            node = nodes.get(touch.node)
            if node is not None and node.paused_between(touch.at - lease, touch.at):
                continue
            newer = ended[touch.activation]
            late.append(
                f"activation {touch.activation} on {touch.node} acted for {touch.request} at "
                f"t={touch.at:.3f}, after activation {newer.activation} on {newer.node} had "
                f"taken over (acting from t={newer.at:.3f})"
            )
            continue
        if current is not None:
            ended[current.activation] = touch
        current = touch
    assert not late, (
        f"{len(late)} act(s) of an activation after a newer one had acted (a stale lease "
        f"holder kept going): {'; '.join(late[:3])}"
    )


@invariant
def contention_reads_fresh(ctx: WorkloadContext) -> None:
    """Reads are fresh (linearizable against the acknowledged counts): a read of the tally
    answers at least the highest count acknowledged before the read was first issued. The
    tally answers reads from memory, which is the truth only while its activation holds the
    lease; a holder that lost it (a pause past its deadline, a takeover) must not answer from
    memory, whatever happened to its process. So pauses are not excused here; the check is off
    only where wall clocks jump or are skewed apart by the lease margin or more, where the
    lease protocol itself cannot keep two holders apart (docs/actors.md, "Clock skew")."""
    reads: list[Ack] = ctx.state.get("reads", [])
    if not reads or "clock.jump" in ctx.sim.faults.active:
        return
    offsets = [node.clock.offset for node in ctx.sim.nodes]
    if offsets and max(offsets) - min(offsets) >= ctx.state["margin"]:
        return
    acks: list[Ack] = sorted(ctx.state.get("acks", []), key=lambda a: a.acked)
    stale = []
    for read in reads:
        before = [a for a in acks if a.acked < read.issued]
        newest = max(before, key=lambda a: a.count, default=None)
        if newest is not None and read.count < newest.count:
            stale.append(
                f"{read.request} on {read.node} (issued t={read.issued:.3f}, answered "
                f"t={read.acked:.3f}) read {read.count}, but {newest.request} on {newest.node} "
                f"had been acknowledged count {newest.count} at t={newest.acked:.3f}"
            )
    assert not stale, f"{len(stale)} stale read(s) of the tally: {'; '.join(stale[:3])}"


def check_lease_kept(
    touches: list[Touch], margin: float, excused: Callable[[Touch], bool]
) -> list[str]:
    """Each act happened while the stored lease record named the acting activation and, read
    on the actor's own wall clock, had at least ``margin`` seconds left (docs/actors.md, "Clock
    skew": a holder stops using its lease ``lease_margin`` before the expiry it wrote, so that
    nodes whose clocks are within the margin of its own never take over while it acts).
    ``excused(touch)``: an act the runtime promises nothing about (a thawed process)."""
    problems = []
    for t in touches:
        if t.wall is None:
            continue
        if t.holder != t.activation:
            if not excused(t):
                problems.append(
                    f"activation {t.activation} on {t.node} acted for {t.request} at "
                    f"t={t.at:.3f} while the stored lease named {t.holder}"
                )
        elif (t.expires is None or t.expires + 1e-6 < t.wall + margin) and not excused(t):
            left = "no expiry" if t.expires is None else f"{t.expires - t.wall:.3f}s left"
            problems.append(
                f"activation {t.activation} on {t.node} acted for {t.request} at "
                f"t={t.at:.3f} with {left} on its stored lease (the margin is {margin:g}s)"
            )
    return problems


@invariant
def contention_lease_kept(ctx: WorkloadContext) -> None:
    """Every act of the tally happened under its own stored lease, with at least the lease
    margin left on the acting node's wall clock (:func:`check_lease_kept`). Model-free: it
    reads the lease record as stored at each act. A lease record whose expiry is written on
    the wrong clock or too short, or a holder that uses its lease past ``expiry - margin``
    (a deadline counted from the wrong instant, a renewal that extends the deadline without
    extending the record), fails it at the act, whatever the other node does. Excused: a node
    paused within the last lease duration, and runs whose clocks jump."""
    if "clock.jump" in ctx.sim.faults.active:
        return
    lease: float = ctx.state["lease"]
    nodes = {node.name: node for node in ctx.sim.nodes}

    def excused(t: Touch) -> bool:
        node = nodes.get(t.node)
        return node is not None and node.paused_between(t.at - lease, t.at)

    problems = check_lease_kept(ctx.state.get("touches", []), ctx.state["margin"], excused)
    assert not problems, (
        f"{len(problems)} act(s) outside the lease as stored: {'; '.join(problems[:3])}"
    )
