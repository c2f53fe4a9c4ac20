"""Every scenario of the ``agents`` workload lists the general properties it can judge
(Dlead23-1): an invariant is judged after the run, so listing one moves no trace, and one left
out let a planted bug pass (rts-agent-delete-drops-every-step, steps_recorded)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ENTRY = "kelpie_dst.workloads.agents:agents"
GENERAL = (
    "no_acknowledged_message_lost",
    "single_activation",
    "no_mixing_across_agents",
    "every_request_completed",
    "memory_blocks_within_limits",
    "streams_match_results",
    "tool_effects_exactly_once",
    "acknowledged_is_durable",
    "llm_sees_one_agent",
    "tool_outcomes_correct",
    "turns_complete",
    "context_complete",
    "interrupted_runs_finished",
    "runs_end_cleanly",
    "prompts_show_stored_memory",
    "steps_recorded",
)
# Left out on purpose: the double effect a broken lease timing allows (Dlead19-2).
EXEMPT = {("agent_split_brain", "tool_effects_exactly_once")}
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_every_agents_scenario_lists_the_general_properties() -> None:
    missing = []
    for path in sorted(SCENARIOS.glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        if doc.get("workload", {}).get("entry") != ENTRY:
            continue
        listed = set(doc.get("invariants", []))
        coherent = bool(doc["workload"].get("params", {}).get("coherence"))
        wanted = [*GENERAL, "memory_matches_storage"] if coherent else list(GENERAL)
        missing += [
            f"{path.stem}: {name}"
            for name in wanted
            if name not in listed and (path.stem, name) not in EXEMPT
        ]
    assert missing == []
