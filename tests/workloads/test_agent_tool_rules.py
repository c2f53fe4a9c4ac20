"""agent_tool_rules, agent_schedules_calendar and agent_mcp_crashes (session 10, rtE): the
scenarios pass and repeat their traces; the oracles name hand-made bad histories."""

from __future__ import annotations

import json

import attrs
import pytest

from kelpie_agent.llm import LlmRequest, Message, TextBlock, Tool, ToolCall, ToolResult
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._mcp_checks import check_mcp_recovers
from kelpie_dst.workloads._tool_rule_model import (
    RuleSet,
    allowed_now,
    judge_archival_searches,
    judge_pauses,
    judge_request,
    judge_sandbox_counts,
    judge_timeouts,
    prefilled_now,
)

TOOLS = ("rt_a", "rt_b", "rt_c", "rt_d", "rt_route", "rt_stop", "run_code")
RULES = RuleSet(
    tools=TOOLS,
    run_first=(("rt_a", {"mode": "init"}),),
    children=(("rt_a", ("rt_b", "rt_route"), {"rt_b": {"mode": "child"}}),),
    parents=(("rt_c", ("rt_d",)),),
    conditionals=(("rt_route", {"left": "rt_b", "right": "rt_c"}, "rt_d"),),
    max_counts=(("rt_b", 1),),
    exits=("rt_stop",),
)
ALL_BUT_D = frozenset(TOOLS) - {"rt_d"}


@pytest.mark.parametrize(
    ("scenario", "metric"),
    [
        ("agent_tool_rules", "tool_rules.requests"),
        ("agent_schedules_calendar", "schedules.fired"),
        ("agent_mcp_crashes", "oracle.steps"),
    ],
)
def test_the_scenario_passes_and_repeats_its_trace(scenario: str, metric: str) -> None:
    loaded = load_scenario(scenario)
    first, again = run_scenario(loaded, 0), run_scenario(loaded, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics.get(metric, 0) > 0, first.metrics
    assert first.result.trace_hash == again.result.trace_hash


def _packaged(text: str, ok: bool = True, at: int = 0) -> str:
    time = f"2026-01-01 12:{at // 60:02d}:{at % 60:02d} AM UTC+0000"
    return json.dumps({"status": "OK" if ok else "Failed", "message": text, "time": time})


def _request(
    steps: list[list[tuple[str, dict[str, str], str]]], offered: frozenset[str]
) -> LlmRequest:
    """A request stepping run ``rr-a0-m0`` after ``steps`` (each: calls with their results)."""
    messages = [Message("user", (TextBlock("rr-a0-m0 follow your tool rules"),))]
    n = 0
    for step in steps:
        calls, results = [], []
        for name, args, result in step:
            n += 1
            calls.append(ToolCall(f"toolu_{n}", name, json.dumps(args)))
            results.append(ToolResult(f"toolu_{n}", result))
        messages.append(Message("assistant", tuple(calls)))
        messages.append(Message("user", tuple(results)))
    tools = tuple(Tool(t, t, {"type": "object"}) for t in sorted(offered))
    return LlmRequest("m", tuple(messages), "", tools)


def test_the_model_of_the_rules() -> None:
    assert allowed_now(RULES, [], None) == {"rt_a"}
    assert prefilled_now(RULES, [], "rt_a") == {"mode": "init"}
    assert allowed_now(RULES, ["rt_a"], _packaged("x")) == {"rt_b", "rt_route"}
    assert prefilled_now(RULES, ["rt_a"], "rt_b") == {"mode": "child"}
    assert allowed_now(RULES, ["rt_a", "rt_route"], _packaged("left")) == {"rt_b"}
    assert allowed_now(RULES, ["rt_a", "rt_route"], _packaged("nowhere")) == frozenset(TOOLS)
    assert allowed_now(RULES, ["rt_a", "rt_c"], _packaged("x")) == {"rt_d"}
    assert allowed_now(RULES, ["rt_a", "rt_b", "rt_c", "rt_d"], None) == ALL_BUT_D - {"rt_b"}


def test_a_correct_run_passes() -> None:
    steps = [
        [("rt_a", {"mode": "free"}, _packaged("rt_a mode=init n=1 text=x"))],
        [("rt_b", {"mode": "fast"}, _packaged("rt_b mode=child n=2 text=x"))],
    ]
    assert judge_request(_request(steps, ALL_BUT_D - {"rt_b"}), {0: RULES}, "r") == []


def test_the_oracle_names_what_breaks_the_rules() -> None:
    refused = _packaged("[ToolConstraintError] Cannot call rt_c", ok=False)
    ran_forbidden = [[("rt_c", {"mode": "free"}, _packaged("rt_c mode=free n=1 text=x"))]]
    problems = judge_request(_request(ran_forbidden, frozenset({"rt_a"})), {0: RULES}, "r")
    assert any("ran although the rules allowed only ['rt_a']" in p for p in problems)
    wrongly_refused = [[("rt_a", {"mode": "free"}, refused)]]
    problems = judge_request(_request(wrongly_refused, frozenset({"rt_a"})), {0: RULES}, "r")
    assert any("was refused although the rules allowed it" in p for p in problems)
    no_prefill = [[("rt_a", {"mode": "free"}, _packaged("rt_a mode=free n=1 text=x"))]]
    problems = judge_request(_request(no_prefill, frozenset({"rt_b", "rt_route"})), {0: RULES}, "r")
    assert any("ran with mode=free, not init" in p for p in problems)
    offered_wrong = judge_request(_request([], frozenset(TOOLS)), {0: RULES}, "r")
    assert any("but after nothing the rules allow ['rt_a']" in p for p in offered_wrong)
    stopped = [
        [("rt_a", {"mode": "free"}, _packaged("rt_a mode=init n=1 text=x"))],
        [("rt_stop", {"mode": "free"}, _packaged("rt_stop mode=free n=2 text=x"))],
    ]
    problems = judge_request(_request(stopped, frozenset(TOOLS)), {0: RULES}, "r")
    assert any("asked again after the exit_loop tool rt_stop" in p for p in problems)


def test_the_sandbox_and_timeout_oracles() -> None:
    good = [("rt_a", "rt_a mode=free n=1 text=x"), ("rt_route", "left"), ("rt_b", "n=3")]
    assert judge_sandbox_counts("a0", good) == []
    bad = [("rt_a", "rt_a mode=free n=2 text=x")]
    assert "found 1 line(s) in its file, not 0" in judge_sandbox_counts("a0", bad)[0]
    slow = [[("run_code", {"code": "sleep 9; echo x"}, _packaged("x"))]]
    fast = [[("run_code", {"code": "sleep 1; echo x"}, _packaged("TimeoutError: x", ok=False))]]
    assert "past the 5s tool timeout" in judge_timeouts([_request(slow, frozenset())], 5.0)[0]
    assert "reported timed out" in judge_timeouts([_request(fast, frozenset())], 5.0)[0]


@attrs.frozen
class _Call:
    node: str
    started: float
    error: str | None


def test_mcp_recovers_names_a_node_whose_tools_stay_broken() -> None:
    calls = [
        _Call("n1", 5.0, "McpConnectionError"),
        _Call("n1", 40.0, "McpConnectionError"),
        _Call("n1", 41.0, None),
        _Call("n2", 40.0, "McpConnectionError"),
        _Call("n2", 45.0, "McpConnectionError"),
    ]
    problems = check_mcp_recovers(calls, healed_at=20.0)
    assert len(problems) == 1 and problems[0].startswith("n2: all 2 MCP call(s)")


def test_the_archival_oracle() -> None:
    hits = json.dumps(
        [{"content": "n1", "tags": ["kelp"]}, {"content": "n2", "tags": ["kelp", "reef"]}]
    )
    all_of = [
        [
            (
                "archival_memory_search",
                {"tags": ["kelp", "reef"], "tag_match_mode": "all"},
                _packaged(hits),
            )
        ]
    ]
    any_of = [[("archival_memory_search", {"tags": ["reef", "tide"]}, _packaged(hits))]]
    problems = judge_archival_searches([_request(all_of, frozenset())])
    assert len(problems) == 1 and "tagged ['kelp']" in problems[0]
    problems = judge_archival_searches([_request(any_of, frozenset())])
    assert len(problems) == 1 and "tagged ['kelp']" in problems[0]


def test_the_pause_oracle() -> None:
    rules = attrs.evolve(RULES, tools=(*TOOLS, "pause_heartbeats"), run_first=())
    pause = (
        "pause_heartbeats",
        {"minutes": 1},
        _packaged("Pausing timed heartbeats for 1 min", at=10),
    )
    later = ("rt_d", {"mode": "free"}, _packaged("rt_d mode=free n=1 text=x", at=40))
    after = ("rt_d", {"mode": "free"}, _packaged("rt_d mode=free n=2 text=x", at=75))
    went_on = _request([[pause], [later]], frozenset(TOOLS))
    problems = judge_pauses(went_on, {0: rules}, "r")
    assert [p.split(": ", 1)[1] for p in problems] == [
        "rr-a0-m0 step 1 ended 0s into a 1-minute heartbeat pause, yet its run went on",
        "rr-a0-m0 step 2 ended 30s into a 1-minute heartbeat pause, yet its run went on",
    ]
    past = judge_pauses(_request([[pause], [after]], frozenset(TOOLS)), {0: rules}, "r")
    assert len(past) == 1 and "step 1 ended" in past[0]  # step 2 ended after the pause
    forced = ("rt_a", {"mode": "free"}, _packaged("rt_a mode=free n=1 text=x", at=20))
    assert judge_pauses(_request([[pause, forced]], frozenset(TOOLS)), {0: rules}, "r") == []
