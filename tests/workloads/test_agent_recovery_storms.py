"""``storage_attempts``: the agent runtime and the service get that many storage tries (0: the
defaults), and ``agent_recovery_storms``, where resumes and requests give up on storage often,
passes and repeats itself."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import ScenarioError, load_scenario, run_scenario


def test_a_bad_storage_attempts_is_a_clear_error() -> None:
    with pytest.raises(ScenarioError, match="storage_attempts"):
        load_scenario("agent_recovery_storms", ["workload.params.storage_attempts=-1"])


@pytest.mark.slow  # two runs of ~15 s each on a loaded machine
def test_agent_recovery_storms_gives_up_often_passes_and_repeats_itself() -> None:
    small = ["workload.params.agents=3", "workload.params.messages=2"]
    scenario = load_scenario("agent_recovery_storms", small)
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    failure = first.result.failure
    assert first.ok, f"{failure and failure.describe()}\n{first.replay_line()}"
    assert first.metrics["requests.retries"] > 0
    assert first.result.trace_hash == again.result.trace_hash
