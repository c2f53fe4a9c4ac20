"""agent_loop_bulky: the agent loop with large tool results on a small context window. The
scenario passes, fills its prompts close to the window and repeats its trace."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_loop_bulky")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["loop.acked"] >= 4
    assert first.metrics["loop.prompt_fill"] > 600  # the results fill the window
    assert first.result.trace_hash == again.result.trace_hash
