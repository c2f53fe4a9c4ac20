"""The lease-record audit (leaseR): it accepts the protocol's own sequence of writes and names
a renewal over another activation's lease, a release by a node that does not hold the lease, a
request naming a token with the wrong epoch, a handoff no request named, and a superseded
holder acting past its usable time; actor_takeovers passes, repeats its trace and has handoffs
and takeovers for it to judge."""

from __future__ import annotations

from typing import Any

import msgpack

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._lease_audit import LeaseAudit, check_superseded

A = "tally/t"
OKEY, LKEY, WKEY = (f"actors/{kind}/{A}".encode() for kind in ("owner", "lease", "wanted"))


def _pack(**fields: Any) -> bytes:
    data: bytes = msgpack.packb(fields, use_bin_type=True)
    return data


def _acquire(audit: LeaseAudit, node: str, epoch: int, token: str, at: float) -> None:
    owner = _pack(node=node, session=f"s-{node}", epoch=epoch, token=token)
    writes = [(OKEY, owner), (LKEY, _pack(token=token, epoch=epoch, expires=at + 6)), (WKEY, None)]
    audit.applied(node, at, writes, lambda key: True)


def _renew(audit: LeaseAudit, node: str, epoch: int, token: str, at: float) -> None:
    audit.applied(node, at, [(LKEY, _pack(token=token, epoch=epoch, expires=at + 6))], bool)


def _release(audit: LeaseAudit, node: str, epoch: int, at: float) -> None:
    owner = _pack(node=None, session=None, epoch=epoch, token=None)
    audit.applied(node, at, [(OKEY, owner), (LKEY, None)], lambda key: True)


def _want(audit: LeaseAudit, node: str, token: str, epoch: int, at: float) -> None:
    audit.applied(node, at, [(WKEY, _pack(node=node, target=token, epoch=epoch))], bool)


def test_the_protocols_own_writes_pass() -> None:
    audit = LeaseAudit()
    _acquire(audit, "n1", 1, "t1", 0.0)
    _renew(audit, "n1", 1, "t1", 1.5)
    _want(audit, "n2", "t1", 1, 2.0)
    audit.observe("n1", "actor.handoff", {"actor": A, "epoch": 1}, 2.1)
    _release(audit, "n1", 1, 2.5)
    _acquire(audit, "n2", 2, "t2", 2.6)
    assert audit.record_problems == [] and audit.handoff_problems == []
    assert audit.counts["acquisitions"] == 2 and audit.counts["handoffs"] == 1


def test_a_renewal_over_a_newer_activations_lease_is_named() -> None:
    audit = LeaseAudit()
    _acquire(audit, "n1", 1, "t1", 0.0)
    _acquire(audit, "n2", 2, "t2", 3.0)  # n2 took over early (its clock jumped)
    _renew(audit, "n1", 1, "t1", 3.1)
    assert any("renewed with token t1 (epoch 1)" in p for p in audit.record_problems)


def test_a_release_by_a_node_that_does_not_hold_the_lease_is_named() -> None:
    audit = LeaseAudit()
    _acquire(audit, "n1", 1, "t1", 0.0)
    _acquire(audit, "n2", 2, "t2", 3.0)
    _release(audit, "n1", 2, 3.2)
    assert any("released the lease of epoch 2, held by n2" in p for p in audit.record_problems)


def test_epochs_must_go_up_by_one_and_requests_name_real_activations() -> None:
    audit = LeaseAudit()
    _acquire(audit, "n1", 1, "t1", 0.0)
    _release(audit, "n1", 1, 1.0)
    _acquire(audit, "n2", 1, "t2", 2.0)  # the epoch started again after a release
    _want(audit, "n3", "t2", 2, 2.5)  # names t2 with the epoch n3 would take
    problems = " ".join(audit.record_problems)
    assert "acquired epoch 1 after epoch 1" in problems
    assert "names token t2 with epoch 2, but that token is epoch 1" in problems


def test_a_handoff_no_request_named_is_named() -> None:
    audit = LeaseAudit()
    _acquire(audit, "n1", 1, "t1", 0.0)
    _want(audit, "n2", "t1", 1, 0.5)
    _release(audit, "n1", 1, 1.0)
    _acquire(audit, "n2", 2, "t2", 1.1)
    _want(audit, "n3", "t1", 1, 1.2)  # a request for epoch 1 that landed late
    audit.observe("n2", "actor.handoff", {"actor": A, "epoch": 2}, 1.5)
    assert audit.record_problems == []
    assert any("no handoff request ever named it" in p for p in audit.handoff_problems)


def test_a_superseded_holder_acts_only_within_its_usable_time() -> None:
    audit = LeaseAudit()
    _acquire(audit, "n1", 1, "t1", 0.0)
    _acquire(audit, "n2", 2, "t2", 10.0)
    acts = [(13.0, "n1", "t1", "r1"), (14.0, "n1", "t1", "r2"), (20.0, "n2", "t2", "r3")]
    never: Any = lambda node, start, end: False  # noqa: E731
    problems = check_superseded(audit, A, acts, 3.5, never)
    assert len(problems) == 1 and "acted for r2 at t=14.000, 4.000s after epoch 2" in problems[0]
    assert check_superseded(audit, A, acts, 3.5, lambda node, start, end: True) == []


def test_actor_takeovers_passes_repeats_and_has_takeovers_and_handoffs_to_judge() -> None:
    scenario = load_scenario("actor_takeovers", ["workload.params.requests=4"])
    first, again = run_scenario(scenario, 3), run_scenario(scenario, 3)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.result.trace_hash == again.result.trace_hash
    assert first.metrics["contention.acks"] == 3 * 2 * 4
    assert first.metrics["lease.acquisitions"] > 5
    assert first.metrics["lease.handoffs"] > 0 and first.metrics["lease.requests"] > 0
    assert first.metrics["lease.renewals"] > 0
