"""The tool pages and docs/agent.md stay in step with the code."""

from __future__ import annotations

from pathlib import Path

from kelpie_agent.agent import BUILTINS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_built_in_tool_has_a_page_listing_each_parameter() -> None:
    index = (DOCS / "tools" / "README.md").read_text()
    for builtin in BUILTINS:
        page = (DOCS / "tools" / f"{builtin.name}.md").read_text()
        assert page.startswith(f"# {builtin.name}\n")
        assert f"]({builtin.name}.md)" in index
        for name in builtin.parameters["properties"]:
            assert f"| `{name}` |" in page, (builtin.name, name)
        assert f"`{builtin.tool_type}`" in page


def test_the_architecture_page_names_every_stop_reason_and_key() -> None:
    text = (DOCS / "agent.md").read_text()
    for reason in (
        "end_turn",
        "tool_rule",
        "max_steps",
        "llm_api_error",
        "invalid_tool_call",
        "invalid_llm_response",
        "no_tool_call",
        "max_tokens_exceeded",
        "cancelled",
        "error",
    ):
        assert f"`{reason}`" in text, reason
    for key in (
        "agent/<agent_id>",
        "block/<block_id>",
        "tool/<tool_id>",
        "msg/<agent_id>/",
        "msgid/<agent_id>/",
        "passage/<agent_id>/",
        "passageid/<agent_id>/",
        "session/<agent_id>",
    ):
        assert key in text, key
