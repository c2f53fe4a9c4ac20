"""agent_bulk_archive (agent_loop's ``bulk`` agents): an archive past one storage page is
whole after the agent is activated again, and the same seed repeats its trace."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_bulk import BULK_MIN


@pytest.mark.slow  # two runs of about 6 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_bulk_archive", ())
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["loop.bulk_passages"] >= BULK_MIN
    assert first.result.trace_hash == again.result.trace_hash


def test_the_archive_is_larger_than_a_storage_page() -> None:
    from kelpie_agent.agent import _retry

    assert BULK_MIN == _retry._PAGE + 1
