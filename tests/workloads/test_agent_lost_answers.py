"""agent_lost_answers and agent_lost_turns: the dormant site ``service.answer_lost`` armed under
four walkers and under agent_chaos's turns.
Each passes, answers really are lost (and retried), and the trace repeats."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario

SITE = "agent:service.answer_lost"


@pytest.mark.slow  # two runs of about 8 s each; the short sweep runs it in CI
def test_the_scenario_loses_answers_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_lost_answers")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.result.buggify_fired[SITE] >= 10  # answers of applied requests were lost
    for walker in ("settings", "readback", "deletes", "resources"):
        assert first.metrics[f"{walker}.requests"] > 30
        assert first.metrics[f"{walker}.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def test_unarmed_the_site_changes_no_trace() -> None:
    """The same world without the site armed runs as agent_deletes-like scenarios do: no
    firing, and the site leaves nothing in the trace (its runs differ only by the draws the
    armed site made)."""
    scenario = load_scenario(
        "agent_lost_answers",
        [
            "simulation.hazards=[]",
            "workload.params.settings=false",
            "workload.params.readback=false",
            "workload.params.resources=false",
            "workload.params.detaches=false",
            "duration=60s",
        ],
    )
    deletes = load_scenario("agent_deletes")
    quiet, reference = run_scenario(scenario, 0), run_scenario(deletes, 0)
    assert quiet.ok and reference.ok
    assert SITE not in quiet.result.buggify_fired
    assert quiet.result.trace_hash == reference.result.trace_hash


@pytest.mark.slow  # two runs of about 5 s each; the short sweep runs it in CI
def test_agent_lost_turns_loses_turn_answers_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_lost_turns")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.result.buggify_fired[SITE] >= 3
    assert first.metrics["messages.acked"] == first.metrics["messages.planned"]
    assert first.result.trace_hash == again.result.trace_hash
