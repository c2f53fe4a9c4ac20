"""``resources`` (``_agent_resources``): the scenario, and the walker's own pure pieces."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kelpie_agent.api._models_common import check_json_value
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_resources import (
    MAX_DEPTH,
    SECRETS,
    ResourceWalker,
    nested,
    secrets_in,
)


@pytest.mark.slow  # two runs of about 5 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_resources")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["resources.shown"] > 60
    assert first.metrics["resources.refusals"] == 2
    assert first.metrics["resources.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def test_nesting_at_the_limit_is_what_the_server_accepts() -> None:
    check_json_value(nested(MAX_DEPTH))
    with pytest.raises(ValueError, match="nested deeper"):
        check_json_value(nested(MAX_DEPTH + 1))


def test_a_secret_is_found_anywhere_in_an_answer() -> None:
    assert secrets_in({"env": {"K": "****"}, "auth_token": "****"}) == []
    shown = {"servers": [{"custom_headers": {"X": f"Bearer {SECRETS[1]}"}}], SECRETS[2]: 1}
    assert secrets_in(shown) == sorted([SECRETS[1], SECRETS[2]])


def _walker() -> ResourceWalker:
    world = SimpleNamespace(node_names=["n1"])
    rng = SimpleNamespace(choice=lambda seq: seq[0])
    return ResourceWalker(SimpleNamespace(world=world), rng)


def test_a_secret_shown_and_a_refusal_accepted_are_problems() -> None:
    walker = _walker()
    walker._no_secret("mcp_servers.list", [{"auth_token": "****"}])
    assert walker.problems_found() == []
    walker._no_secret("mcp_servers.retrieve", {"auth_token": SECRETS[0]})
    walker.refusals += [("rename to a taken name", True), ("nested 33 levels", False)]
    assert walker.problems_found() == [
        f"mcp_servers.retrieve ({SECRETS[0]}): shows a secret the client sent",
        "nested 33 levels: accepted, but the contract refuses it",
    ]


def test_a_rule_or_an_approval_shown_otherwise_than_set_is_in_the_log() -> None:
    walker = _walker()
    rule = {"tool_name": "t", "type": "conditional", "default_child": "d"}
    walker._set("rule:agent-1:t:conditional", **rule)
    walker._set("approval:agent-1", gated=["t"])
    walker._rules_shown(
        "agents.retrieve",
        {"id": "agent-1", "tool_rules": [{**rule, "default_child": None}]},
    )
    fields = {s.key: s.fields for s in walker.log.shown}
    assert fields["rule:agent-1:t:conditional"]["default_child"] is None
    assert fields["approval:agent-1"] == {"gated": []}
    from kelpie_dst.workloads._agent_readback_checks import check_readback

    problems = check_readback(walker.log)
    assert any("default_child=None" in p for p in problems)
    assert any("gated=[]" in p for p in problems)
