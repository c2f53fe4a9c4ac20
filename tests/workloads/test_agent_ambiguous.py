"""agent_ambiguous_commits: creates and sends inside a storage storm whose commits land without
an answer. The scenario passes, repeats its trace, and its new oracles saw work."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario

SMALL = [
    "workload.params.agents=3",
    "workload.params.messages=1",
    "workload.params.ambiguous_creates=4",
    "duration=20s",
]


@pytest.mark.slow  # two runs of about 10 s each
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_ambiguous_commits", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["creates.acked"] == 12
    assert first.metrics["filters.reads"] > 10
    assert first.metrics["oracle.fresh_prompts"] > 0
    assert first.result.trace_hash == again.result.trace_hash
