"""agent_loop: the agent loop's shapes under faults (loopH). The scenario passes and repeats
its trace; each property names hand-made bad histories and passes good ones."""

from __future__ import annotations

import random

import attrs

from kelpie_agent.llm import LlmRequest, Message
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims.llm._faults import Failure
from kelpie_dst.workloads._agent_loop_checks import (
    Piece,
    Send,
    Stored,
    check_endings,
    check_mcp_verdicts,
    check_one_result_per_call,
    check_streams_stored,
    check_token_streams,
    check_valid_calls_run,
)
from kelpie_dst.workloads.agent_loop import (
    AgentInfo,
    LoopLog,
    LoopObserver,
    LoopPolicy,
    answer_words,
    check_call_budget,
    check_listed_statuses,
)

SMALL = ["workload.params.span=15", "duration=40s"]


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_loop", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["loop.acked"] > 5
    assert first.result.trace_hash == again.result.trace_hash


def _ends(*sends: Send) -> list[str]:
    return check_endings(sends, max_empty_responses=2, no_tool_call_nudges=1)


def _acked(shape: str, stop: str, steps: int, max_steps: int = 8, **kw: object) -> Send:
    send = Send("agent-1", shape, "t0-1", max_steps, "send", **kw)  # type: ignore[arg-type]
    send.acked, send.stop_reason, send.steps = True, stop, steps
    return send


def test_a_cut_reply_told_end_turn_is_named_and_a_whole_one_is_not() -> None:
    whole = _acked("long", "end_turn", 1, marker="end-t0-1", reply="kelp tide end-t0-1")
    cut = _acked("long", "end_turn", 1, marker="end-t0-1", reply="kelp tide")
    told_cut = _acked("long", "max_tokens_exceeded", 1, marker="end-t0-1", reply="kelp")
    assert _ends(whole, told_cut) == []
    [problem] = _ends(cut)
    assert "told end_turn, but the reply is cut" in problem
    wrong = _acked("long", "max_tokens_exceeded", 1, marker="end-t0-1", reply="a end-t0-1")
    assert "reply is whole" in _ends(wrong)[0]


def test_budgets_must_be_spent_exactly() -> None:
    good = [
        _acked("chain", "max_steps", 3, max_steps=3),
        _acked("empty", "invalid_llm_response", 3),
        _acked("thoughts", "no_tool_call", 2),
    ]
    assert _ends(*good) == []
    bad = [
        _acked("chain", "max_steps", 2, max_steps=3),  # one step early
        _acked("empty", "invalid_llm_response", 4),  # one reminder too many
        _acked("thoughts", "no_tool_call", 3),
        _acked("empty", "end_turn", 1),  # an empty answer taken as a finished turn
    ]
    problems = _ends(*bad)
    assert len(problems) == 4, problems


def test_streamed_pieces_must_add_up_to_the_stored_message_of_their_id() -> None:
    send = Send("agent-1", "blank", "t0-1", 8, "tokens")
    send.pieces = [
        Piece("m0", "assistant_message", "\n\n"),  # a blank text block, never stored
        Piece("m1", "tool_call_message", "", "conversation_search"),
        Piece("m1", "tool_call_message", '{"query":'),
        Piece("m1", "tool_call_message", '"t0-1 a"}'),
    ]
    stored = {"m1": Stored("m1", "tool_call_message", '{"query":"t0-1 a"}', "conversation_search")}
    assert check_token_streams([send], stored) == []
    # the call stored under the blank block's id: the pieces of m0 are not a tool call
    shifted = {"m0": Stored("m0", "tool_call_message", '{"query":"t0-1 a"}', "x")}
    assert "streamed as ['assistant_message']" in check_token_streams([send], shifted)[0]
    changed = {"m1": Stored("m1", "tool_call_message", '{"query":"t0-1 b"}', "x")}
    assert 'streamed \'{"query":"t0-1 a"}\'' in check_token_streams([send], changed)[0]


def test_a_stream_without_tokens_shows_only_stored_messages() -> None:
    send = Send("agent-1", "chain", "t0-1", 3, "stream")
    send.pieces = [
        Piece("m1", "tool_call_message", "{}", "x"),
        Piece("m2", "assistant_message", "hi"),
    ]
    send.failed = "UnavailableError"
    stored = {"m1": Stored("m1", "tool_call_message", "{}")}
    [problem] = check_streams_stored([send], stored)
    assert "assistant_message m2" in problem and "failed" in problem
    stored["m2"] = Stored("m2", "assistant_message", "hi")
    assert check_streams_stored([send], stored) == []


def _request(system: str, *texts: str) -> LlmRequest:
    return LlmRequest("m", [Message.user(t) for t in texts], system)


def test_a_step_without_its_runs_input_is_named() -> None:
    log = LoopLog()
    log.agents[0] = AgentInfo(0, "agent-0", "memgpt", 32_000, 1024)
    policy = LoopPolicy(log)
    rng = random.Random(0)
    probe = 'loopprobe {"beats": 4, "shape": "beats", "tag": "t0-1"}'
    assert policy.respond(_request("I am loop agent 0.", probe), rng)
    assert log.problems == []
    policy.respond(_request("I am loop agent 0.", '{"type": "heartbeat"}'), rng)
    assert "does not show its run's input" in log.problems[0]


def test_a_retry_before_retry_after_and_an_overfull_prompt_are_named() -> None:
    log = LoopLog()
    log.agents[0] = AgentInfo(0, "agent-0", "chat", 3200, 500)
    clock = [0.0]
    observer = LoopObserver(log, now=lambda: clock[0])
    request = _request("I am loop agent 0.", "hello")
    refused = Failure("rate_limited", "429", 429, "rate_limit_error", retry_after=8.0)
    observer.observe(request, refused, "server-1")
    clock[0] = 8.0  # the retry-after has passed: a retry is fine (and refused again)
    observer.observe(request, refused, "server-1")
    observer.observe(_request("I am loop agent 0.", "hello"), None, "server-1")  # another call
    assert log.problems == []
    clock[0] = 9.5  # the same call again, 1.5 s after its second 429
    observer.observe(request, None, "server-1")
    assert "sent again 1.500s later" in log.problems[0]
    log.problems.clear()
    big = _request("I am loop agent 0.", "x" * 13_000)
    observer.observe(big, refused, "server-1")
    assert "over its context window" in log.problems[0]


def test_answers_are_deterministic_and_end_with_their_marker() -> None:
    assert answer_words("t1-2", 3) == answer_words("t1-2", 3)
    assert answer_words("t1-2", 3).endswith(" end-t1-2")
    assert attrs.has(Send)


def test_a_failed_mcp_call_stored_as_a_success_is_named() -> None:
    failed = Stored("r1", "tool_return_message", "quota exceeded", "desk_refuse", "error")
    good = Stored("r2", "tool_return_message", "t0-1", "desk_lookup", "success")
    assert check_mcp_verdicts({"r1": failed, "r2": good}, "desk_refuse") == []
    wrong = attrs.evolve(failed, status="success")
    [problem] = check_mcp_verdicts({"r1": wrong}, "desk_refuse")
    assert "stored as success" in problem


def test_a_well_formed_call_refused_is_named_and_a_cut_one_is_not() -> None:
    refusal = "Error: invalid_tool_call: conversation_search: bad arguments"
    stored = {
        "c1": Stored("c1", "tool_call_message", '{"query":"a"}', "conversation_search", None, "k1"),
        "r1": Stored("r1", "tool_return_message", refusal, "conversation_search", "error", "k1"),
        "c2": Stored("c2", "tool_call_message", '{"query":"a', "conversation_search", None, "k2"),
        "r2": Stored("r2", "tool_return_message", refusal, "conversation_search", "error", "k2"),
    }
    [problem] = check_valid_calls_run(stored)
    assert "well-formed call of conversation_search" in problem
    del stored["r1"]
    assert check_valid_calls_run(stored) == []


def test_a_call_with_two_results_or_a_result_without_a_call_is_named() -> None:
    call = Stored("c1", "tool_call_message", "{}", "conversation_search", None, "k1")
    first = Stored("r1", "tool_return_message", "[]", "conversation_search", "success", "k1")
    assert check_one_result_per_call({"c1": call, "r1": first}) == []
    again = attrs.evolve(first, id="r2")
    orphan = attrs.evolve(first, id="r3", call_id="k9")
    problems = check_one_result_per_call({"c1": call, "r1": first, "r2": again, "r3": orphan})
    assert len(problems) == 2, problems
    assert "has two results" in problems[0] and "answers no stored call" in problems[1]


def test_a_run_runs_at_most_its_tool_call_budget() -> None:
    budget_text = '{"status": "Failed", "message": "invalid_tool_call: tool call budget exhausted"}'
    broken = '{"status": "Failed", "message": "invalid_tool_call: the arguments are not JSON"}'

    def flood(*outcomes: str) -> dict[str, Stored]:
        """One flood call per outcome: ok (ran), budget (refused for it), broken (refused
        for its arguments)."""
        stored: dict[str, Stored] = {}
        for k, outcome in enumerate(outcomes, 1):
            args = f'{{"query": "t5-1 flood {k}"}}'
            stored[f"c{k}"] = Stored(f"c{k}", "tool_call_message", args, "x", None, f"k{k}")
            text, status = {
                "ok": ("ok", "success"),
                "budget": (budget_text, "error"),
                "broken": (broken, "error"),
            }[outcome]
            stored[f"r{k}"] = Stored(f"r{k}", "tool_return_message", text, "x", status, f"k{k}")
        return stored

    assert check_call_budget(["t5-1"], flood("ok", "ok", "ok", "ok", "budget", "budget"), 4) == []
    # a call refused for its arguments did not run, so it does not count
    within = flood("ok", "broken", "ok", "ok", "ok", "budget")
    assert check_call_budget(["t5-1"], within, 4) == []
    assert check_call_budget(["t5-1"], flood("ok", "ok", "ok", "ok", "ok", "budget"), 4) == [
        "flood t5-1: a call ran (success) after 4 calls of the run had run; the budget is 4"
    ]
    assert check_call_budget(["t5-1"], flood("ok", "ok", "ok", "budget"), 4) == [
        "flood t5-1: a call refused after 3 calls of the run had run; the budget is 4"
    ]
    # another run's calls are not this run's
    assert check_call_budget(["t5-2"], flood("ok", "ok", "ok", "ok", "ok"), 4) == []


def test_a_listed_run_has_the_status_of_its_stop_reason() -> None:
    runs = [("r1", "failed", "max_tokens_exceeded"), ("r2", "completed", "max_steps")]
    assert check_listed_statuses([*runs, ("r3", "running", None)]) == []
    assert check_listed_statuses([("r4", "completed", "no_tool_call")]) == [
        "run r4: stop reason no_tool_call but listed completed (want failed)"
    ]
