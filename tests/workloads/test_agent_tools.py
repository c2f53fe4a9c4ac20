"""agent_tools (toolI): the scenario repeats its trace, and ``tools_contract``'s pure checks
name each kind of broken answer on hand-made logs."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_tools_checks import (
    ListSeen,
    RunSeen,
    StoredCall,
    ToolsLog,
    check_lists,
    check_memory,
    check_refusals,
    check_runs,
    check_schemas,
    check_stored,
    check_tools,
)
from kelpie_dst.workloads._agent_tools_model import (
    GIVEN,
    LONG_LIMIT,
    MCP_BLOCKS,
    TOOLS,
    VERSION,
    long_text,
)


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_tools")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["tools.runs"] >= 15
    assert first.metrics["tools.stored"] >= 6
    assert first.result.trace_hash == again.result.trace_hash


def _tool(case_name: str) -> dict[str, Any]:
    case = next(c for c in (*TOOLS, VERSION, GIVEN) if c.name == case_name)
    start = case.source.index(f"def {case.name}(")
    summary = case.description or case.source[start:].split('"""')[1].strip().splitlines()[0]
    return {
        "name": case.name,
        "description": summary,
        "json_schema": {
            "name": case.name,
            "description": summary,
            "parameters": {
                "type": "object",
                "properties": copy.deepcopy(dict(case.properties)),
                "required": list(case.required),
            },
        },
        "return_char_limit": case.return_char_limit or 50_000,
    }


def test_the_documented_schemas_pass() -> None:
    schemas = [("read", case.name, _tool(case.name)) for case in (*TOOLS, VERSION, GIVEN)]
    assert check_schemas(schemas) == []


def test_a_keyword_only_parameter_shown_optional_is_named() -> None:
    tool = _tool("tc_shape")
    tool["json_schema"]["parameters"]["required"] = ["city"]
    [problem] = check_schemas([("read", "tc_shape", tool)])
    assert "required is ['city']" in problem


def test_a_dropped_default_a_wrong_type_or_a_lost_limit_is_named() -> None:
    tool = _tool("tc_shape")
    del tool["json_schema"]["parameters"]["properties"]["days"]["default"]
    tool["json_schema"]["parameters"]["properties"]["scale"]["type"] = "integer"
    problems = check_schemas([("read", "tc_shape", tool)])
    assert any("'days'" in p for p in problems)
    assert any("'scale'" in p for p in problems)
    long = _tool("tc_long")
    long["return_char_limit"] = 50_000
    [problem] = check_schemas([("read", "tc_long", long)])
    assert "return_char_limit" in problem


def test_a_list_filter_ignored_is_named() -> None:
    good = ListSeen("?name=tc_fail", ("tc_fail",), ("tc_fail",))
    bad = ListSeen("?name=tc_fail", ("send_message", "tc_fail", "tc_long"), ("tc_fail",))
    assert check_lists([good]) == []
    [problem] = check_lists([bad])
    assert "not exactly ['tc_fail']" in problem


def _run(tool: str, args: dict[str, Any], answer: Any, status: int = 200) -> RunSeen:
    return RunSeen(f"run {tool}", tool, args, False, status, answer)


def _ok(text: str, **extra: Any) -> dict[str, Any]:
    return {"status": "success", "func_return": text, "stdout": [], "stderr": [], **extra}


def test_direct_runs_that_answer_the_return_value_pass() -> None:
    runs = [
        _run("tc_kinds", {"kind": "words"}, _ok('plain words, "quoted"')),
        _run("tc_kinds", {"kind": "none"}, _ok("None")),
        _run("tc_kinds", {"kind": "map"}, _ok('{"b": 1, "a": [1, "x"]}')),
        _run(
            "tc_noisy",
            {"text": "ab"},
            _ok("ba", stdout=["noisy out ab"], stderr=["warning: noisy ab"]),
        ),
        _run(
            "tc_fail",
            {"reason": "r"},
            {"status": "error", "func_return": "Error executing function tc_fail: ValueError: r"},
        ),
        _run("shelf_multi", {}, _ok("\n".join(MCP_BLOCKS))),
        RunSeen("run tc_shape", "tc_shape", {"city": "x"}, True, 400, {"detail": "units"}),
    ]
    assert check_runs(runs) == []


def test_a_quoted_string_a_stderr_failure_or_a_lost_block_is_named() -> None:
    quoted = _run("tc_kinds", {"kind": "words"}, _ok(json.dumps('plain words, "quoted"')))
    noisy = _run(
        "tc_noisy",
        {"text": "ab"},
        {
            "status": "error",
            "func_return": "Error executing function tc_noisy: warning: noisy ab",
            "stdout": ["noisy out ab"],
            "stderr": ["warning: noisy ab"],
        },
    )
    first = _run("shelf_multi", {}, _ok(MCP_BLOCKS[0]))
    ran = RunSeen("run tc_shape", "tc_shape", {"city": "x"}, True, 200, _ok("TypeError"))
    problems = check_runs([quoted, noisy, first, ran])
    assert len(problems) == 4
    assert "not a 400 or 422 refusal" in problems[3]


def _stored(name: str, args: dict[str, Any], message: str, status: str = "success") -> StoredCall:
    package = {"status": "OK" if status == "success" else "Failed", "message": message, "time": "t"}
    return StoredCall(
        "letta", f"call-{name}-{len(message)}", name, json.dumps(args), status, json.dumps(package)
    )


def _note(text: str, limit: int) -> str:
    return (
        f"{text[:limit]}... [NOTE: function output was truncated since it exceeded the "
        f"character limit: {len(text)} > {limit}]"
    )


def test_stored_results_cut_at_the_tools_limit_pass() -> None:
    at = long_text(LONG_LIMIT)
    over = long_text(LONG_LIMIT + 1)
    stored = [
        _stored("tc_long", {"n": LONG_LIMIT}, at),
        _stored(
            "tc_long", {"n": LONG_LIMIT + 1, "request_heartbeat": True}, _note(over, LONG_LIMIT)
        ),
        _stored("tc_kinds", {"kind": "list"}, "[3, 1, 2]"),
        _stored(
            "tc_fail", {"reason": "r"}, "Error executing function tc_fail: ValueError: r", "error"
        ),
    ]
    assert check_stored(stored) == []


def test_a_result_not_cut_or_cut_at_another_limit_is_named() -> None:
    over = long_text(LONG_LIMIT + 1)
    uncut = _stored("tc_long", {"n": LONG_LIMIT + 1}, over)
    short = _stored("tc_long", {"n": LONG_LIMIT + 1}, _note(over, LONG_LIMIT - 1))
    refused = _stored("tc_kinds", {"kind": "none"}, "invalid_tool_call: bad arguments", "error")
    problems = check_stored([uncut, short, refused])
    assert len(problems) == 3
    assert "over the tool's limit" in problems[0]


def test_a_failed_request_is_a_problem() -> None:
    log = ToolsLog()
    log.problems.append("the client gave up: PUT /v1/tools/")
    assert check_tools(log) == ["the client gave up: PUT /v1/tools/"]


@pytest.mark.parametrize("kind", ["words", "wide", "empty"])
def test_strings_are_results_as_they_are(kind: str) -> None:
    from kelpie_dst.workloads._agent_tools_model import KIND_VALUES

    value = KIND_VALUES[kind]
    assert check_runs([_run("tc_kinds", {"kind": kind}, _ok(value))]) == []
    assert check_runs([_run("tc_kinds", {"kind": kind}, _ok(json.dumps(value)))]) != []


def test_an_mcp_error_answered_as_a_success_is_named() -> None:
    from kelpie_dst.workloads._agent_tools_model import MCP_REFUSAL

    good = _run("shelf_shut", {}, {"status": "error", "func_return": MCP_REFUSAL})
    bad = _run("shelf_shut", {}, _ok(MCP_REFUSAL))
    assert check_runs([good]) == []
    assert len(check_runs([bad])) == 1


def test_a_stale_source_after_an_update_is_named() -> None:
    fresh = _run("tc_version", {"text": "b", "times": 2}, _ok("v2 bb"))
    stale = _run("tc_version", {"text": "b", "times": 2}, _ok("v1 b"))
    assert check_runs([fresh]) == []
    assert len(check_runs([stale])) == 1


def test_a_bad_source_accepted_or_refused_without_naming_it_is_named() -> None:
    good = ("PUT with an async def", 400, "{'detail': 'source_code line 1: ...'}")
    accepted = ("PUT with *args", 200, "{'id': 'tool-1'}")
    crashed = ("PUT with a syntax error", 500, "{'detail': 'internal error'}")
    assert check_refusals([good]) == []
    assert len(check_refusals([accepted, crashed])) == 2


def test_a_given_description_ignored_is_named() -> None:
    tool = _tool("tc_kinds")
    tool["description"] = tool["json_schema"]["description"] = (
        "Answer a value of the kind asked for."
    )
    [problem] = check_schemas([("read", "tc_kinds", tool)])
    assert "Kinds of values, as the client describes them." in problem


def test_a_memory_run_whose_effect_is_not_read_back_is_named() -> None:
    good = ("block tc-notes after memory_rethink", "first note", "first note")
    lost = ("block tc-notes after memory_rethink", "404 no block labelled tc-notes", "first note")
    assert check_memory([good]) == []
    [problem] = check_memory([lost])
    assert "404" in problem
