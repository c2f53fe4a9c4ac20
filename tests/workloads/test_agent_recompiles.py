"""``conversation_recompiles`` (``_agent_threads._recompile``) in agent_conversations_forks."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario


@pytest.mark.slow  # two runs of about 7 s each; the short sweep runs it in CI
def test_the_scenario_recompiles_each_conversation_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_conversations_forks")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    # each of the three agents' one conversation, recompiled and read back
    assert first.metrics["conversations.recompiled"] == 3
    assert first.result.trace_hash == again.result.trace_hash
