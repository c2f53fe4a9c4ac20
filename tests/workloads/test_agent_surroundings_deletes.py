"""agent_surroundings_deletes (session 17, rtM): rounds of passage deletes while one commit in
ten has an unknown outcome. The scenario passes and repeats its trace, and its deletes run."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_surroundings_deletes")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["surroundings.problems"] == 0
    assert first.metrics["coherence.index_audits"] > 10
    assert first.metrics["surroundings.message_windows"] >= 1
    assert first.result.trace_hash == again.result.trace_hash
