"""agent_settings: an agent's settings in and out (creates in each of Letta's shapes, PATCHes of
random subsets, agent files exported and imported twice) through the SDK under faults. The
scenario passes and repeats its trace; the oracle names hand-made bad histories."""

from __future__ import annotations

from typing import Any

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_settings_checks import SettingsLog, check_settings


@pytest.mark.slow  # two runs of about 4 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_settings")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["settings.reads"] >= 12
    assert first.metrics["settings.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _model(**changes: Any) -> dict[str, Any]:
    model: dict[str, Any] = {
        "name": "settings-0",
        "system": "You keep shelves.",
        "description": "",
        "tags": ["kelp", "shelf"],
        "metadata": {"shelf": 1},
        "timezone": "Europe/Paris",
        "model": "anthropic/claude-haiku-4-5",
        "context_window": 64_000,
        "max_tokens": 2048,
        "tool_rules": [{"type": "run_first", "tool_name": "conversation_search"}],
        "blocks": {"notes": ("shelf", 40, True, "what is on the shelf")},
    }
    model.update(changes)
    return model


def _shown(**changes: Any) -> dict[str, Any]:
    """The model as agent_shape renders an AgentState (rules as sorted tuples)."""
    shown = _model(**changes)
    shown["tool_rules"] = sorted(
        (r["type"], r["tool_name"], tuple(r.get("children") or ()), r.get("max_count_limit"))
        for r in shown["tool_rules"]
    )
    return shown


def test_a_consistent_history_passes() -> None:
    log = SettingsLog()
    log.reads.append(("create", _model(), _shown()))
    log.reads.append(("update", _model(tags=[]), _shown(tags=[])))
    log.copies.append(("import", _shown(), _shown(name="settings-copy-a")))
    log.block_ids += [("settings-0", ("block-1",)), ("settings-copy-a", ("block-2",))]
    log.open_source = {"a.txt": True, "b.txt": False}
    log.open_copy = {"a.txt": True, "b.txt": False}
    assert check_settings(log) == []


def test_an_update_that_resets_a_field_it_did_not_give_is_named() -> None:
    log = SettingsLog()
    log.reads.append(("update name", _model(name="x"), _shown(name="x", tags=[])))
    [problem] = check_settings(log)
    assert "tags []" in problem and "update name" in problem


def test_a_setting_lost_in_a_shape_is_named() -> None:
    log = SettingsLog()
    log.reads.append(("create with llm_config", _model(), _shown(max_tokens=4096)))
    [problem] = check_settings(log)
    assert "max_tokens 4096, want 2048" in problem


def test_a_copy_that_lost_a_block_limit_or_shares_a_block_is_named() -> None:
    log = SettingsLog()
    copy = _shown(blocks={"notes": ("shelf", 20_000, True, "what is on the shelf")})
    log.copies.append(("import", _shown(), copy))
    log.block_ids += [("settings-0", ("block-1",)), ("settings-copy-a", ("block-1",))]
    problems = check_settings(log)
    assert any("blocks" in p and "20000" in p for p in problems)
    assert any("share block block-1" in p for p in problems)


def test_a_closed_file_open_in_the_copy_is_named_unless_the_import_was_unsure() -> None:
    log = SettingsLog()
    log.open_source = {"a.txt": True, "b.txt": False}
    log.open_copy = {"a.txt": True, "b.txt": True}
    [problem] = check_settings(log)
    assert "open" in problem
    log.unsure.append("settings-copy-a")
    assert check_settings(log) == []


def test_a_write_to_a_copy_seen_in_the_source_is_named() -> None:
    log = SettingsLog()
    log.isolation.append(("settings-0 after", {"scratch": ("a",)}, {"scratch": ("b",)}))
    [problem] = check_settings(log)
    assert "settings-0 after" in problem
