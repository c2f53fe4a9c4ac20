"""Same seed, same run: the actor runtime under chaos gives the same trace hash twice in this
process and in a fresh process (with a different memory layout)."""

from __future__ import annotations

import kelpie_dst

from . import workloads

FAULTS = [
    "process.crash=0.02",
    "network.partition=0.3",
    "storage.write_fail=0.05",
    "storage.unavailable=0.02",
    "storage.latency=0.1",
    "storage.conflict=0.05",
    "clock.skew=1.0",
]


def test_the_same_seed_gives_the_same_trace_in_process_and_in_a_fresh_process() -> None:
    kelpie_dst.assert_deterministic(
        workloads.determinism_main, seeds=range(2), runs=3, guards="strict", faults=FAULTS
    )


def test_the_full_chaos_run_repeats_exactly_and_different_seeds_differ() -> None:
    faults = workloads.chaos_faults(pause=True, jumps=True)
    first = kelpie_dst.run(workloads.determinism_main, seed=5, faults=faults, guards="strict")
    again = kelpie_dst.run(workloads.determinism_main, seed=5, faults=faults, guards="strict")
    other = kelpie_dst.run(workloads.determinism_main, seed=6, faults=faults, guards="strict")
    assert first.ok, first.failure and first.failure.describe()
    assert first == again and first.value == again.value
    assert first.trace_hash != other.trace_hash
    assert first.events > 200  # the runtime's lease events are in the trace
