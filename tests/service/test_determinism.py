"""Same seed, same run: the service under chaos (three nodes, crashes, partitions, storage
faults, skew) gives the same trace hash twice in this process and in a fresh process with a
different hash seed; different seeds differ."""

from __future__ import annotations

import kelpie_dst

from . import chaos

FAULTS = [
    "process.crash=0.02",
    "network.partition=0.3",
    "storage.write_fail=0.05",
    "storage.read_fail=0.03",
    "storage.unavailable=0.02",
    "storage.latency=0.1",
    "storage.conflict=0.05",
    "clock.skew=1.0",
]


def test_the_same_seed_gives_the_same_trace_in_process_and_in_a_fresh_process() -> None:
    kelpie_dst.assert_deterministic(
        chaos.determinism_main,
        seeds=range(2),
        runs=3,
        vary_hashseed=True,
        guards="strict",
        faults=FAULTS,
    )


def test_the_full_chaos_run_repeats_exactly_and_different_seeds_differ() -> None:
    faults = chaos.chaos_faults()
    first = kelpie_dst.run(chaos.determinism_main, seed=7, faults=faults, guards="strict")
    again = kelpie_dst.run(chaos.determinism_main, seed=7, faults=faults, guards="strict")
    other = kelpie_dst.run(chaos.determinism_main, seed=8, faults=faults, guards="strict")
    assert first.ok, first.failure and first.failure.describe()
    assert first.trace_hash == again.trace_hash and first.value == again.value
    assert first.trace_hash != other.trace_hash
    assert first.events > 100 and len(first.value) == 6  # type: ignore[arg-type]
