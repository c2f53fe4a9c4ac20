"""The lease-record invariants of the actor-contention workload (leaseR): the audit of
:mod:`._lease_audit` applied to the tally's records, handoffs and acts."""

from __future__ import annotations

from ..scenario import WorkloadContext, invariant
from ._contention_checks import Touch
from ._lease_audit import LeaseAudit, check_superseded

__all__ = ["handoffs_requested", "lease_records_consistent", "superseded_holders_stop"]


def _audit(ctx: WorkloadContext) -> LeaseAudit:
    audit = ctx.state.get("lease_audit")
    world = ctx.state.get("world")
    if audit is None and world is not None:  # the agents workload's World
        audit = getattr(world, "lease_audit", None)
    assert isinstance(audit, LeaseAudit), "the lease audit did not run (a SQLite backend?)"
    return audit


def _shown(problems: list[str], audit: LeaseAudit) -> str:
    more = audit.counts.get("problems", 0) - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


@invariant
def lease_records_consistent(ctx: WorkloadContext) -> None:
    """The lease records changed only as the protocol changes them: an acquisition by the node
    it names (epoch one up, a fresh token, the lease record with them), a release by the
    holder, a renewal by the holder with its own token and epoch, a handoff request by its asker
    naming a real activation; the lease record exists exactly while the lease is held."""
    audit = _audit(ctx)
    problems = audit.record_problems
    assert not problems, f"lease records changed wrongly: {_shown(problems, audit)}"


@invariant
def handoffs_requested(ctx: WorkloadContext) -> None:
    """An activation handed the actor over only after a handoff request named it (its token):
    a request left over for an earlier activation, or for another, moves nothing."""
    audit = _audit(ctx)
    problems = audit.handoff_problems
    assert not problems, f"handoffs nobody asked for: {'; '.join(problems)}"


@invariant
def superseded_holders_stop(ctx: WorkloadContext) -> None:
    """Once a newer activation of the tally acquired the lease, an older one acted for at most
    ``lease_duration - lease_margin`` virtual seconds more: its renewals fail from then on, so
    its deadline is within that, whatever the wall clocks do. Only a paused node is excused."""
    audit = _audit(ctx)
    touches: list[Touch] = ctx.state.get("touches", [])
    nodes = {node.name: node for node in ctx.sim.nodes}

    def paused(name: str, start: float, end: float) -> bool:
        node = nodes.get(name)
        return node is not None and node.paused_between(start, end)

    acts = [(t.at, t.node, t.activation, t.request) for t in touches]
    usable = ctx.state["lease"] - ctx.state["margin"]
    problems = check_superseded(audit, ctx.state["actor"], acts, usable, paused)
    assert not problems, (
        f"{len(problems)} act(s) of a superseded activation: {'; '.join(problems[:3])}"
    )
