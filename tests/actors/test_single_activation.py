"""Single activation across 3 nodes sharing one database, under crashes, partitions, storage
faults and clock skew, over many seeds (30 by default; ``--dst-seeds 200`` for more).

Invariants, checked after each run (see checks.py):

* no committed write of actor state came from an activation that did not own the lease at
  that commit, and no two activations' committed writes interleave (effective activations
  are disjoint);
* every acknowledged increment is in the final state, at the position the client was told;
* while the skew assumption holds (no pauses, no clock jumps), no two activations of an actor
  even *run* at overlapping times;
* once faults heal, every request completes (liveness).

A canary proves the checkers bite: the same workload with an actor that writes around the
lease loses acknowledged increments and is caught.
"""

from __future__ import annotations

from typing import Any

import pytest

import kelpie_dst
from kelpie_dst import Fault

from . import checks, workloads
from .actors import Journal, Ledger


def _run(seed: int, faults: list[Fault], **workload: Any) -> tuple[kelpie_dst.RunResult, Any]:
    out: dict[str, Any] = {}

    async def main(sim: kelpie_dst.Simulation) -> None:
        out.update(await workloads.ledger_chaos(sim, **workload))

    result = kelpie_dst.run(main, seed=seed, faults=faults, guards="strict")
    replay = f"seed={seed}; replay: DST_SEED={seed} pytest {__file__}"
    assert result.ok, f"{replay}\n{result.failure and result.failure.describe()}"
    return result, out


def _check(seed: int, out: dict[str, Any], *, timing: bool) -> checks.FencingReport:
    clients, cluster = out["clients"], out["cluster"]
    fencing = checks.check_fencing(cluster.store.log)
    problems = [*fencing.stale_writes, *fencing.interleaved]
    problems += checks.check_ledgers(out["final"], clients.acked, clients.issued)
    problems += [f"non-retryable error: {e}" for e in clients.fatal]
    if timing:
        problems += checks.check_spans_disjoint(cluster.journal.spans)
    assert not problems, f"seed={seed}:\n" + "\n".join(problems)
    return fencing


@pytest.mark.dst(seeds=30)
def test_single_activation_and_no_lost_increments_under_crashes_partitions_storage_faults_and_skew(
    dst_seed: int,
) -> None:
    _, out = _run(dst_seed, workloads.chaos_faults())
    fencing = _check(dst_seed, out, timing=True)
    clients = out["clients"]
    assert len(clients.acked) == 80  # liveness: everything completed after the heal
    assert fencing.acquisitions >= 10  # the actors really moved between activations


@pytest.mark.dst(seeds=10)
def test_fencing_holds_when_pauses_and_clock_jumps_break_the_timing_assumption(
    dst_seed: int,
) -> None:
    _, out = _run(dst_seed, workloads.chaos_faults(pause=True, jumps=True))
    _check(dst_seed, out, timing=False)
    assert len(out["clients"].acked) == 80


@pytest.mark.dst(seeds=5)
def test_storage_slower_than_the_lease_margin_never_stretches_an_activation(
    dst_seed: int,
) -> None:
    """Storage latency spikes longer than the lease margin (2-5 s against a 2.5 s margin):
    a renewal that took that long must count its lease from when it began (when the stored
    expiry was computed), never from when it returned, or the activation would run on after
    the others saw its lease expire. Still under the skew assumption, so spans stay disjoint."""
    slow = Fault("storage.latency", 0.05, params=(("min", 2.0), ("max", 5.0)))
    faults = [f for f in workloads.chaos_faults() if f.type != "storage.latency"] + [slow]
    _, out = _run(dst_seed, faults, require_liveness=False)
    _check(dst_seed, out, timing=True)


@pytest.mark.dst(seeds=10)
def test_corrupted_lease_records_never_let_two_activations_overlap(dst_seed: int) -> None:
    """Corruption hits lease records too (and actor state, which no runtime can restore: so no
    liveness requirement here)."""
    faults = [*workloads.chaos_faults(), Fault("storage.corruption", 0.05)]
    _, out = _run(dst_seed, faults, require_liveness=False, settle=30.0)
    _check(dst_seed, out, timing=True)


def _unfenced(aid: Any, journal: Journal) -> Ledger:
    return Ledger(aid, journal, fenced=False)


def test_the_checkers_catch_an_actor_that_writes_around_the_lease() -> None:
    """Canary: with pauses and clock jumps, a Ledger whose writes skip ``ctx.transaction()``
    commits stale writes and loses acknowledged increments; the checkers must notice."""
    caught = []
    for seed in range(6):
        _, out = _run(seed, workloads.chaos_faults(pause=True, jumps=True), factory=_unfenced)
        fencing = checks.check_fencing(out["cluster"].store.log)
        clients = out["clients"]
        lost = checks.check_ledgers(out["final"], clients.acked, clients.issued)
        if fencing.stale_writes and lost:
            caught.append(seed)
    assert len(caught) >= 3, caught
