"""Real bugs a sweep found and nobody has fixed yet, kept as strict xfails: each fails today
for the stated reason, and the test itself fails the moment the bug is fixed, so the fix
must remove the xfail (and add the seed to seeds/). See docs/sweeps.md."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,  # any other failure (RuntimeError below) fails the test
    reason="a send retried with the same otid is answered with its earlier run while that run "
    "is unfinished and not the agent's current session (find_retried_run): stop reason "
    "'error', one step, where the run later ends with two (session 18, docs/sweeps.md)",
)
def test_agent_chaos_seed_300929_answers_a_retried_send_with_its_finished_run() -> None:
    run = run_scenario(load_scenario("agent_chaos"), 300929)
    failure = run.result.failure
    if failure is not None and "usage reported 1 steps, the run lists 2" not in failure.describe():
        raise RuntimeError(f"agent_chaos seed 300929 now fails otherwise: {failure.describe()}")
    assert failure is None, failure.describe()
