"""A real model's step shapes (``step_shapes``) and the checks of where runs stop, on
fabricated histories and requests: each passes what a correct agent does and catches a planted
violation; and the agent_step_shapes scenario is the same run for the same seed."""

from __future__ import annotations

import json
import random

from kelpie_agent.llm import LlmRequest, Message, TextBlock, Tool, ToolCall, ToolResult
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_checks import Ack, Msg
from kelpie_dst.workloads._agent_moves import Expect, Moves
from kelpie_dst.workloads._agent_recovery import RunWrite
from kelpie_dst.workloads._agent_shapes import (
    MAX_IDENTICAL_CALLS,
    core_replace_model,
    prior_identical,
    repeated_search,
    shaped_calls,
)
from kelpie_dst.workloads._agent_stops import (
    check_invalid_stops,
    check_reply_ends_run,
    check_results_once,
    check_told_stop_reasons,
)


def _m(seq: int, kind: str, step: str, tool: str | None = None, status: str | None = None) -> Msg:
    return Msg(f"m{seq}", seq, "run-1", kind, "", tool=tool, status=status, step_id=step)


def _reply_step(first: int, step: str, status: str = "success") -> list[Msg]:
    """send_message and a memory note in one step, in the order a model gave them."""
    return [
        _m(first, "tool_call_message", step, "send_message"),
        _m(first + 1, "tool_call_message", step, "core_memory_append"),
        _m(first + 2, "tool_return_message", step, "send_message", status),
        _m(first + 3, "tool_return_message", step, "core_memory_append", "success"),
    ]


def test_a_reply_ends_its_run_whatever_else_its_step_did() -> None:
    user = Msg("u1", 1, "run-1", "user_message", "tag-a1-m1 chat x0: kelp")
    good = [user, *_reply_step(2, "step-1")]
    assert check_reply_ends_run({"a1": good}) == []
    # a failed reply does not end the run: the model is asked again
    retried = [user, *_reply_step(2, "step-1", "error"), *_reply_step(6, "step-2")]
    assert check_reply_ends_run({"a1": retried}) == []
    # planted: the run went on to another model step after the reply succeeded
    went_on = [*good, _m(6, "tool_call_message", "step-2", "send_message")]
    assert check_reply_ends_run({"a1": went_on}) == [
        "a1 run run-1: step step-2 called the model again after step step-1's send_message "
        "had replied and ended the run (tool_call_message m6)"
    ]
    # another run of the same agent is another matter
    other = Msg("m6", 6, "run-2", "tool_call_message", "", tool="send_message", step_id="s2")
    assert check_reply_ends_run({"a1": [*good, other]}) == []


def _ack(stop: str) -> Ack:
    return Ack("a1", 1, "otid-a1-m1", "tag-a1-m1 junk x3: kelp", "run-1", (), stop)


def _junk_step(first: int, step: str, *statuses: str) -> list[Msg]:
    calls = [_m(first + i, "tool_call_message", step, "x") for i in range(len(statuses))]
    n = first + len(statuses)
    returns = [_m(n + i, "tool_return_message", step, "x", s) for i, s in enumerate(statuses)]
    return [*calls, *returns]


def test_invalid_tool_call_needs_max_invalid_steps_steps_of_refusals_only() -> None:
    refused = [
        *_junk_step(1, "s1", "error"),
        *_junk_step(3, "s2", "error", "error"),
        *_junk_step(7, "s3", "error"),
    ]
    assert check_invalid_stops([_ack("invalid_tool_call")], {"a1": refused}, 3) == []
    # planted: a step whose good call ran counted as an invalid one
    mixed = [*refused[:2], *_junk_step(3, "s2", "error", "success"), *refused[6:]]
    assert check_invalid_stops([_ack("invalid_tool_call")], {"a1": mixed}, 3) == [
        "a1 message #1 (otid-a1-m1) run run-1: stopped with invalid_tool_call, but step s2 "
        "among its last 3 was not all refused (x ran)"
    ]
    assert check_invalid_stops([_ack("end_turn")], {"a1": mixed}, 3) == []
    short = check_invalid_stops([_ack("invalid_tool_call")], {"a1": refused[2:]}, 3)
    assert short and "after 2 step(s), fewer than max_invalid_steps=3" in short[0]


def test_invalid_tool_call_stops_at_the_step_that_completes_the_streak() -> None:
    refusal = '{"status": "Failed", "message": "invalid_tool_call: there is no tool named x"}'
    failure = '{"status": "Failed", "message": "Error executing function x: ValueError"}'

    def step(first: int, name: str, text: str) -> list[Msg]:
        call = Msg(f"m{first}", first, "run-1", "tool_call_message", "", tool="x", step_id=name)
        back = Msg(
            f"m{first + 1}",
            first + 1,
            "run-1",
            "tool_return_message",
            text,
            tool="x",
            status="error",
            step_id=name,
        )
        return [call, back]

    three = [*step(1, "s1", refusal), *step(3, "s2", refusal), *step(5, "s3", refusal)]
    assert check_invalid_stops([_ack("invalid_tool_call")], {"a1": three}, 3) == []
    # planted: the run went on for a step after the third refused step in a row
    late = [*three, *step(7, "s4", refusal)]
    assert check_invalid_stops([_ack("invalid_tool_call")], {"a1": late}, 3) == [
        "a1 message #1 (otid-a1-m1) run run-1: step s3 made 3 steps in a row whose calls were "
        "all refused, but 1 more step(s) ran"
    ]
    # planted: the run stopped there, but said something else
    assert check_invalid_stops([_ack("max_steps")], {"a1": three}, 3) == [
        "a1 message #1 (otid-a1-m1) run run-1: step s3 made 3 steps in a row whose calls were "
        "all refused, but the run ended 'max_steps'"
    ]
    # a tool that ran and failed is not a refusal: the streak starts again after it
    mixed = [*step(1, "s1", refusal), *step(3, "s2", failure), *step(5, "s3", refusal)]
    assert (
        check_invalid_stops([_ack("max_steps")], {"a1": [*mixed, *step(7, "s4", refusal)]}, 3) == []
    )


def test_core_memory_replace_replaces_every_occurrence_within_the_limit() -> None:
    value = "kelp tide kelp 海海\nreef foam reef"
    replaced = (True, "K tide K 海海\nreef foam reef")
    assert core_replace_model(value, "kelp", "K", 100)[:2] == replaced
    assert core_replace_model(value, "海", "é", 32)[1] == "kelp tide kelp éé\nreef foam reef"
    assert core_replace_model(value, "", "x", 100)[:2] == (False, value)
    assert core_replace_model(value, "otter", "x", 100)[:2] == (False, value)
    # at the limit (in characters, not bytes) and one over
    at = core_replace_model(value, "reef", "r", len(value) - 6)
    assert at[0] and len(at[1]) == len(value) - 6
    assert not core_replace_model(value, "reef", "rr", len(value) - 5)[0]


def test_a_client_is_told_the_stop_reason_its_run_ended_with() -> None:
    def write(at: int, status: str, stop: str | None) -> RunWrite:
        return RunWrite(at, float(at), "server-1", "run-1", "a1", None, status, stop)

    runs = [write(1, "running", None), write(5, "running", None), write(9, "completed", "end_turn")]
    assert check_told_stop_reasons([_ack("end_turn")], runs) == []
    # planted: a retry answered from the run's record as it was before the run was resumed
    assert check_told_stop_reasons([_ack("error")], runs) == [
        "a1 message #1 (otid-a1-m1): the client was told stop reason 'error', but run run-1 "
        "ended 'end_turn' (t=9.000 on server-1)"
    ]
    assert check_told_stop_reasons([_ack("error")], runs[:2]) == []  # never ended: not judged


def _search(call_id: str, query: str, result: str) -> tuple[Message, Message]:
    args = json.dumps({"query": query, "limit": 3, "request_heartbeat": True})
    call = Message("assistant", (ToolCall(call_id, "conversation_search", args),))
    return call, Message("user", (ToolResult(call_id, result),))


def test_a_search_repeated_past_max_identical_calls_must_be_refused() -> None:
    ran = json.dumps({"status": "OK", "message": "found", "time": "t"})
    refused = json.dumps({"status": "Failed", "message": "invalid_tool_call: repeated", "time": ""})
    run = [m for i in range(MAX_IDENTICAL_CALLS) for m in _search(f"c{i}", "tag-a1-m1", ran)]
    args = {"query": "tag-a1-m1", "limit": 3}
    assert prior_identical(run, "conversation_search", args) == MAX_IDENTICAL_CALLS
    assert prior_identical(run, "conversation_search", {"query": "other", "limit": 3}) == 0
    assert prior_identical([*_search("r", "tag-a1-m1", refused)], "conversation_search", args) == 0
    tool = Tool("conversation_search", "search", {"type": "object", "properties": {}})
    request = LlmRequest("m", (Message("user", (TextBlock("x"),)),), "system", (tool,), 100)
    expects: list[Expect] = []
    moves = Moves(request, random.Random(1), expects.append, lambda *a: None)
    call = repeated_search(moves, 1, "conversation_search", args, "tag-a1-m1", run)
    assert [(e.call_id, e.ok, e.why) for e in expects] == [
        (call.id, False, "repeated identical call (conversation_search)")
    ]
    expects.clear()  # one fewer: it must run and find what it looks for
    repeated_search(moves, 1, "conversation_search", args, "tag-a1-m1", run[2:])
    assert [(e.ok, e.contains) for e in expects] == [(True, "tag-a1-m1")]


def test_a_parallel_step_may_call_one_tool_twice() -> None:
    schema = {"type": "object", "properties": {"request_heartbeat": {"type": "boolean"}}}
    tools = tuple(Tool(n, n, schema) for n in ("core_memory_append", "archival_memory_insert"))
    request = LlmRequest("m", (Message("user", (TextBlock("x"),)),), "system", tools, 100)
    names = []
    for seed in range(20):
        moves = Moves(request, random.Random(seed), lambda e: None, lambda *a: None)
        calls = shaped_calls("parallel", "tag-a1-m1", 1, 1, 1, moves, [])
        assert calls is not None and len({c.id for c in calls}) == len(calls)
        names.append(sorted(c.name for c in calls))
    assert any(len(set(n)) < len(n) for n in names)  # the same tool twice in one step


def _call(seq: int, step: str, call: str, kind: str = "tool_call_message", run: str = "r1") -> Msg:
    return Msg(f"m{seq}", seq, run, kind, "", tool="x", step_id=step, call_id=call)


def _result(seq: int, step: str, call: str, run: str = "r1") -> Msg:
    return Msg(
        f"m{seq}", seq, run, "tool_return_message", "", tool="x", status="success",
        step_id=step, call_id=call,
    )  # fmt: skip


def test_every_call_of_a_step_gets_exactly_one_result() -> None:
    two = [
        _call(1, "s1", "c1"),
        _call(2, "s1", "c2"),
        _result(3, "s1", "c1"),
        _result(4, "s1", "c2"),
    ]
    after = [*two, _call(5, "s2", "c3"), _result(6, "s2", "c3")]
    answers = {"c1": ("c1", "c2"), "c2": ("c1", "c2"), "c3": ("c3",)}
    assert check_results_once({"a1": after}, answers) == []
    # the last step of a run may be cut short (a crash, a cancel): no later step, no claim
    assert check_results_once({"a1": [*two, _call(5, "s2", "c3")]}, answers) == []
    # an approval request waits for the client; it is not an unanswered call
    waiting = [_call(1, "s1", "c1", "approval_request_message"), _call(2, "s2", "c2")]
    assert check_results_once({"a1": waiting}, {}) == []
    # planted: a call of step s1 never ran, and the run went on to step s2
    skipped = [two[0], two[1], two[2], *after[4:]]
    assert check_results_once({"a1": skipped}, answers) == [
        "a1 run r1: step s1's call c2 (x) has no stored result, but the run went on to another step"
    ]
    # planted: a recovered step ran c1 again and stored a second result
    again = [*after, _result(7, "s1", "c1")]
    assert check_results_once({"a1": again}, answers) == [
        "a1: tool call c1 (x) has two stored results, m3 and m7"
    ]
    # planted: a result that answers no stored call (the call's message was not stored)
    orphan = [_call(1, "s1", "c1"), _result(2, "s1", "c1"), _result(3, "s1", "c2")]
    problems = check_results_once({"a1": orphan}, answers)
    assert (
        problems[0]
        == "a1: result m3 answers tool call c2 (x), which no stored message before it made"
    )
    assert (
        problems[1] == "a1 run r1: step s1 stored 1 of the 2 calls of the model's answer (c1, c2)"
    )
    # another run's later step says nothing of this run's calls
    other = [_call(1, "s1", "c1"), _call(2, "s2", "c3", run="r2"), _result(3, "s2", "c3", "r2")]
    assert check_results_once({"a1": other}, {}) == []


def test_agent_step_shapes_is_deterministic_and_meets_every_shape() -> None:
    """A small agent_step_shapes run: the same seed is the same run, and the shapes
    happened (an invalid stop, failed junk calls, repeated searches)."""
    scenario = load_scenario("agent_step_shapes", ["workload.params.agents=3"])
    first, second = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, f"{first.result.failure and first.result.failure.describe()}"
    assert first.result.trace_hash == second.result.trace_hash
    assert first.metrics["messages.acked"] == first.metrics["messages.planned"] == 12
    assert first.metrics["tools.failed"] > 0 and first.metrics["tools.memory"] > 0
