"""The tool-schema oracle: built-ins keep their documented signatures, a custom tool is shown
its source's; the pinned table agrees with docs/tools."""

from __future__ import annotations

import re
from pathlib import Path

from kelpie_agent.agent._builtins import BUILTINS
from kelpie_dst.workloads._agent_moves import CUSTOM_TOOL, CUSTOM_TOOL_SOURCE
from kelpie_dst.workloads._tool_signatures import (
    BUILTIN_SIGNATURES,
    check_tool_schemas,
    signature_of_source,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tools"
ROW = re.compile(r"^\| `(\w+)` \|[^|]*\| (yes|no) \|", re.M)


def test_the_pinned_signatures_are_the_documented_ones() -> None:
    for name, signature in BUILTIN_SIGNATURES.items():
        text = (DOCS / f"{name}.md").read_text()
        section = (
            text.split("## Parameters", 1)[1].split("\n## ", 1)[0]
            if "## Parameters" in text
            else ""
        )
        rows = ROW.findall(section)
        assert tuple(p for p, _ in rows) == signature.params, name
        assert {p for p, req in rows if req == "yes"} == signature.required, name


def test_todays_builtins_and_custom_tool_pass() -> None:
    customs = {CUSTOM_TOOL: signature_of_source(CUSTOM_TOOL_SOURCE, CUSTOM_TOOL)}
    shown = [(b.name, b.parameters) for b in BUILTINS]
    tally = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "times": {"type": "integer", "default": 2},
            "request_id": {"type": "string", "default": ""},
            "request_heartbeat": {"type": "boolean"},
        },
        "required": ["text", "request_heartbeat"],
    }
    assert check_tool_schemas([*shown, (CUSTOM_TOOL, tally), ("mcp_echo", {})], customs, "t") == []


def test_a_dropped_parameter_a_wrong_required_set_and_shifted_defaults_are_named() -> None:
    customs = {CUSTOM_TOOL: signature_of_source(CUSTOM_TOOL_SOURCE, CUSTOM_TOOL)}
    insert = {"type": "object", "properties": {"content": {}}, "required": ["content"]}
    search = {"type": "object", "properties": {"query": {}, "limit": {}}, "required": []}
    tally = {
        "type": "object",
        "properties": {
            "text": {"default": 2},
            "times": {"default": ""},
            "request_id": {},
        },
        "required": ["request_id"],
    }
    found = check_tool_schemas(
        [
            ("archival_memory_insert", insert),
            ("semantic_search_files", search),
            (CUSTOM_TOOL, tally),
        ],
        customs,
        "t=1",
    )
    assert found == [
        "t=1: the model was shown archival_memory_insert with parameters ['content'], "
        "documented ['content', 'tags']",
        "t=1: the model was shown semantic_search_files with required [], documented ['query']",
        "t=1: the model was shown tally with required ['request_id'], documented ['text']; "
        "defaults {'text': 2, 'times': ''}, its source's {'times': 2, 'request_id': ''}",
    ]
