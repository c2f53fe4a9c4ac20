"""Quality tests, in the spirit of Hypothesis's own: planted bugs must be found by a sweep
within a stated number of seeds, replayed exactly from their token, and shrunk.

The canary workloads are in ``kelpie_dst/workloads/canaries.py``; their scenarios are in
``scenarios/`` next to this file. Each test's docstring records the first failing seed that
the sweep finds today (the assertion is the bound, not the exact seed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kelpie_dst import FailureKind
from kelpie_dst.scenario import Scenario, load_scenario, run_scenario
from kelpie_dst.scenario._shrink import ShrinkResult, shrink
from kelpie_dst.scenario._sweep import plan, run_items

HERE = Path(__file__).parent / "scenarios"
BOUND = 25  # seeds a sweep may take to find each planted bug


def find_first_failure(name: str) -> tuple[int, FailureKind]:
    items = plan([(str(HERE / f"{name}.toml"), (), range(BOUND))])
    outcome = run_items(items, fail_fast=True)
    failures = outcome.failures
    assert failures, f"the sweep missed the planted bug in {name} within {BOUND} seeds"
    first = failures[0]
    return first.seed, FailureKind(first.exit_code)


def replays_exactly(name: str, seed: int) -> None:
    scenario = load_scenario(str(HERE / f"{name}.toml"))
    run = run_scenario(scenario, seed)
    token = run.token()
    assert token is not None or run.hashseed is None
    again = run_scenario(load_scenario(scenario.ref, scenario.overrides), seed)
    assert again.result.trace_hash == run.result.trace_hash
    assert again.result.failure == run.result.failure


def size(scenario: Scenario, seed: int) -> tuple[int, int]:
    sizes = sum(int(scenario.workload.params[s]) for s in scenario.workload.sizes)
    return len(scenario.faults_for(seed)), sizes


def shrinks(name: str, seed: int, kind: FailureKind) -> ShrinkResult:
    result = shrink(str(HERE / f"{name}.toml"), seed, max_runs=150)
    assert result.kind is kind
    before = size(result.original.scenario, seed)
    after = size(result.minimal.scenario, seed)
    assert after[0] < before[0] or after[1] < before[1], (before, after)
    assert after[0] <= before[0] and after[1] <= before[1]
    return result


def test_lost_update_race() -> None:
    """Read-modify-write of a shared counter without a transaction. First failing seed: 3.
    Shrinking (36 runs): 4 faults -> 1 (storage.latency=0.05 in [0s, 3.75s)), duration
    1m -> 3.75s; sizes stay (3 clients x 4 increments)."""
    seed, kind = find_first_failure("lost_update")
    assert kind is FailureKind.INVARIANT
    replays_exactly("lost_update", seed)
    shrinks("lost_update", seed, kind)


def test_non_idempotent_retry_under_network_delay() -> None:
    """A deposit retried after a timeout, with no request id. First failing seed: 2.
    Shrinking (41 runs): 4 faults -> 1 (network.delay), deposits 8 -> 7."""
    seed, kind = find_first_failure("duplicate_deposit")
    assert kind is FailureKind.INVARIANT
    replays_exactly("duplicate_deposit", seed)
    result = shrinks("duplicate_deposit", seed, kind)
    kept = {f.type for f in result.minimal.scenario.faults_for(seed)}
    assert kept <= {"network.delay", "network.duplicate"}  # the clock and disk are irrelevant


def test_missing_timeout_under_partition() -> None:
    """A UDP client that waits for each answer forever: a datagram lost in a partition hangs
    it past the liveness bound. First failing seed: 3. Shrinking (53 runs): 4 faults -> 2
    (network.partition and a near-zero network.delay), requests 20 -> 5."""
    seed, kind = find_first_failure("udp_no_timeout")
    assert kind is FailureKind.LIVENESS
    replays_exactly("udp_no_timeout", seed)
    shrinks("udp_no_timeout", seed, kind)


def test_write_acknowledged_before_durable() -> None:
    """A server that acknowledges buffered writes and flushes them later loses them in a
    crash. First failing seed: 3. Shrinking (40 runs): 4 faults -> 1 (process.crash),
    writes 12 -> 4."""
    seed, kind = find_first_failure("ack_before_durable")
    assert kind is FailureKind.INVARIANT
    replays_exactly("ack_before_durable", seed)
    result = shrinks("ack_before_durable", seed, kind)
    assert "process.crash" in {f.type for f in result.minimal.scenario.faults_for(seed)}


@pytest.mark.parametrize("name", ["duplicate_deposit", "udp_no_timeout", "ack_before_durable"])
def test_the_bugs_need_their_faults(name: str) -> None:
    """With every fault off these canaries pass: what the sweep finds is the fault path, not
    a false alarm of the harness. (The lost update also races without faults.)"""
    scenario = load_scenario(str(HERE / f"{name}.toml"), ["swarm.enabled=false"])
    off = [f"faults.{e.type}=0" for e in scenario.faults]
    quiet = load_scenario(str(HERE / f"{name}.toml"), off)
    results = [run_scenario(quiet, seed) for seed in range(5)]
    assert all(r.ok for r in results), [r.result.failure for r in results if not r.ok]


def test_data_race_between_two_plain_threads(capsys: pytest.CaptureFixture[str]) -> None:
    """Two plain threads read a shared counter on one line and write it back on the next, with
    nothing blocking in between (kelpie_dst/examples/threads.py): only seeded preemption can
    interleave them. First failing seed: 0; 54 of the first 200 seeds fail. Without preemption
    none of the first 100 fails, and with a lock none does."""
    from kelpie_dst import run
    from kelpie_dst.examples import threads
    from tests.cli.helpers import cli

    failing = next((s for s in range(BOUND) if not run(threads.lost_update, seed=s).ok), None)
    assert failing is not None, f"the sweep missed the thread race within {BOUND} seeds"
    first, again = (run(threads.lost_update, seed=failing) for _ in range(2))
    assert first.failure is not None and first.failure.kind is FailureKind.INVARIANT
    assert "lost updates" in first.failure.message
    assert (again.trace_hash, again.failure) == (first.trace_hash, first.failure)
    entry = "kelpie_dst.examples.threads:lost_update"
    replay = cli(capsys, "run", "--entry", entry, "--seed", str(failing))
    assert replay.code == 1 and f"trace_hash={first.trace_hash}" in replay.out
    assert all(run(threads.locked_update, seed=s).ok for s in range(BOUND))
    assert all(run(threads.lost_update, seed=s, preemption=False).ok for s in range(BOUND))
