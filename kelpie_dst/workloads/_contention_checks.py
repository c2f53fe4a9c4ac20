"""The invariants of the actor-contention workload (kept apart from the workload itself)."""

from __future__ import annotations

import attrs
import msgpack

from ..scenario import WorkloadContext, invariant
from ..shims import open_kv

__all__ = [
    "Ack",
    "contention_at_most_once",
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
