"""actor_fencing (coreJ, session 14): a stale holder's write after its lease was taken over
and released. The scenario passes, repeats its trace and makes its takeovers; the check names
a write after a newer activation's and counts that do not add up."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads.actor_fencing import FencingLog, check_fencing


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("actor_fencing", ["workload.params.rounds=2"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    # each round: n2 served while n1 worked, and the fence refused n1's write once
    assert first.metrics["fencing.takeovers"] == 2
    assert first.metrics["fencing.refused"] == 2
    assert first.result.trace_hash == again.result.trace_hash


def test_a_stale_write_and_counts_that_do_not_add_up_are_named() -> None:
    good = FencingLog(acks={"n1/0": 2, "n2/0": 1}, final=2)
    assert check_fencing(good) == []
    stale = FencingLog(
        acks={"n1/0": 1, "n2/0": 1},
        stale=["n1/0: activation 1 on n1 committed a write after activation 2 had"],
        final=1,
    )
    problems = check_fencing(stale)
    assert problems[0].startswith("n1/0: activation 1 on n1 committed a write")
    assert "acknowledged counts [1, 1] are not 1..2" in problems[1]
    assert "the stored count is 1; 2 requests were acked" in problems[2]
