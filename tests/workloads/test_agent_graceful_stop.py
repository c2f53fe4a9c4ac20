"""agent_graceful_stop (coreJ, session 14): sends cut by a graceful stop of their node. The
scenario passes, repeats its trace and judges its cut sends; the check names a started send
answered as if it never ran."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads.agent_graceful_stop import Cut, StopLog, check_stops


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_graceful_stop", ["workload.params.rounds=3"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["stops.stops"] == 3
    assert first.metrics["stops.judged"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


def test_a_started_send_answered_as_never_run_is_named() -> None:
    good = Cut("p0", seen=True, error="UnavailableError", outcome_unknown=True, retryable=False)
    unseen = Cut("p1", seen=False, error="UnavailableError")  # never started: any 503 is fine
    answered = Cut("p2", seen=True, answered=True)
    assert check_stops(StopLog(cuts=[good, unseen, answered])) == []
    plain = Cut("p3", seen=True, error="UnavailableError", outcome_unknown=False)
    retry = Cut("p4", seen=True, error="UnavailableError", outcome_unknown=True, retryable=True)
    problems = check_stops(StopLog(cuts=[plain, retry]))
    assert len(problems) == 2
    assert "outcome_unknown=False" in problems[0]
    assert "retryable=True" in problems[1]
