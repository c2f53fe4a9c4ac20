"""``agent_run_records`` (convI): the scenario passes and repeats its trace, and each pure check
passes a consistent record and names a planted violation."""

from __future__ import annotations

from typing import Any

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._run_record_checks import (
    Answer,
    Compacted,
    Listed,
    Run,
    Shown,
    ThreadWatch,
    check_answers,
    check_calls_answered,
    check_compactions,
    check_completion_order,
    check_filters,
    check_last_message_order,
    check_runs,
    expected_status,
)

SMALL = ["workload.params.agents=1", "workload.params.span=20", "duration=40s"]


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_run_records", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["records.runs"] > 5
    assert first.result.trace_hash == again.result.trace_hash


A, C = "agent-1", "conv-1"


def _world() -> tuple[list[Run], dict[str, Listed | None], Any, Any, Any]:
    runs = [
        Run("run-1", A, None, "end_turn", (10, 5, 1), "L0o-1"),
        Run("run-2", A, C, "llm_api_error", (0, 0, 0), "L0c0-1"),
        Run("run-3", A, C, "requires_approval", (7, 3, 1), "L0c0-2"),
    ]
    records: dict[str, Listed | None] = {
        "run-1": Listed("run-1", A, None, "completed", "end_turn", (10, 5, 1), 3.0, 1.0),
        "run-2": Listed("run-2", A, C, "failed", "llm_api_error", (0, 0, 0), 5.0, 4.0),
        "run-3": Listed("run-3", A, C, "completed", "requires_approval", (7, 3, 1), 8.0, 6.0),
    }
    threads = {
        (A, None): [
            Shown("m1", "run-1", "user_message"),
            Shown("m2", "run-1", "assistant_message"),
        ],
        (A, C): [Shown("m3", "run-2", "user_message"), Shown("m4", "run-3", "user_message")],
    }
    run_messages = {
        "run-1": [Shown("m1", "run-1", "user_message"), Shown("m2", "run-1", "assistant_message")],
        "run-2": [Shown("m3", "run-2", "user_message")],
        "run-3": [Shown("m4", "run-3", "user_message")],
    }
    steps = {"run-1": [(10, 5)], "run-2": [], "run-3": [(7, 3)]}
    return runs, records, threads, run_messages, steps


def test_runs_that_read_back_as_told_pass() -> None:
    runs, records, threads, run_messages, steps = _world()
    assert check_runs(runs, records, run_messages, threads, steps) == []


def test_a_failed_run_reported_completed_is_named() -> None:
    runs, records, threads, run_messages, steps = _world()
    bad = records["run-2"]
    assert bad is not None
    bad.status = "completed"
    problems = check_runs(runs, records, run_messages, threads, steps)
    assert len(problems) == 1 and "not failed" in problems[0]
    assert expected_status("max_steps") == "completed"
    assert expected_status("cancelled") == "cancelled"


def test_a_run_recorded_outside_its_thread_or_with_its_messages_missing_is_named() -> None:
    runs, records, threads, run_messages, steps = _world()
    bad = records["run-3"]
    assert bad is not None
    bad.thread_id = None
    run_messages["run-2"] = []
    problems = check_runs(runs, records, run_messages, threads, steps)
    assert any("recorded in the agent itself" in p for p in problems)
    assert any("runs.messages.list gives 0" in p for p in problems)


def test_usage_that_disagrees_with_the_record_or_the_steps_is_named() -> None:
    runs, records, threads, run_messages, steps = _world()
    steps["run-1"] = [(10, 5), (4, 4)]
    bad = records["run-3"]
    assert bad is not None
    bad.usage = (7, 3, 2)
    problems = check_runs(runs, records, run_messages, threads, steps)
    assert any("steps add up" in p for p in problems)
    assert any("recorded with (7, 3, 2)" in p for p in problems)


def test_filters_select_exactly_their_field() -> None:
    runs, records, *_ = _world()
    every = [r for r in records.values() if r is not None]
    good = {
        f"conversation:{C}": ["run-2", "run-3"],
        "stop_reason:end_turn": ["run-1"],
        "stop_reason:llm_api_error": ["run-2"],
        "status:completed": ["run-1", "run-3"],
        "status:failed": ["run-2"],
    }
    assert check_filters(A, every, good, runs) == []
    bad = dict(good, **{"stop_reason:end_turn": []})
    problems = check_filters(A, every, bad, runs)
    assert len(problems) == 2 and "misses acknowledged" in problems[1]


def test_conversations_by_last_completion_follow_the_latest_run() -> None:
    every = [
        Listed("r1", A, "c1", "completed", "end_turn", (0, 0, 1), 1.0, 0.5),
        Listed("r2", A, "c2", "completed", "end_turn", (0, 0, 1), 5.0, 4.5),
        Listed("r3", A, "c1", "completed", "end_turn", (0, 0, 1), 9.0, 8.5),
    ]
    assert check_completion_order(A, every, ["c1", "c2"], descending=True) == []
    assert check_completion_order(A, every, ["c2", "c1"], descending=False) == []
    assert check_completion_order(A, every, ["c2", "c1"], descending=True)


@pytest.mark.parametrize(
    ("answer", "result", "ok"),
    [
        (
            Answer(A, C, "t1", "approve", acked=True),
            Shown("x", "r", "tool_return_message", "t1", "success", "found"),
            True,
        ),
        (
            Answer(A, C, "t1", "approve", acked=True),
            Shown(
                "x",
                "r",
                "tool_return_message",
                "t1",
                "error",
                "Error: request to call tool denied. User reason: None",
            ),
            False,
        ),
        (
            Answer(A, C, "t1", "deny", "no way", acked=True),
            Shown(
                "x",
                "r",
                "tool_return_message",
                "t1",
                "error",
                "Error: request to call tool denied. User reason: no way",
            ),
            True,
        ),
        (
            Answer(A, C, "t1", "deny", "no way", acked=True),
            Shown(
                "x",
                "r",
                "tool_return_message",
                "t1",
                "error",
                "Error: request to call tool denied. User reason: None",
            ),
            False,
        ),
        (
            Answer(A, C, "t1", "client", "said", "error", acked=True),
            Shown("x", "r", "tool_return_message", "t1", "error", '{"message": "said"}'),
            True,
        ),
        (
            Answer(A, C, "t1", "client", "said", "error", acked=True),
            Shown("x", "r", "tool_return_message", "t1", "success", '{"message": "said"}'),
            False,
        ),
        (  # an empty result kept empty (rtW)
            Answer(A, C, "t1", "client", "", "success", acked=True),
            Shown("x", "r", "tool_return_message", "t1", "success", '{"message": ""}'),
            True,
        ),
        (  # an empty result the server replaced by its own run of the call
            Answer(A, C, "t1", "client", "", "success", acked=True),
            Shown("x", "r", "tool_return_message", "t1", "success", '{"message": "found 3"}'),
            False,
        ),
        (  # a result that holds the client's text but is not it
            Answer(A, C, "t1", "client", "said", "success", acked=True),
            Shown("x", "r", "tool_return_message", "t1", "success", '{"message": "said more"}'),
            False,
        ),
    ],
)
def test_each_answered_call_returns_what_its_decision_gives(
    answer: Answer, result: Shown, ok: bool
) -> None:
    problems = check_answers([answer], {(A, C): [result]})
    assert (problems == []) is ok, problems


def test_a_prompt_that_loses_an_input_or_shows_another_thread_is_named() -> None:
    watch = ThreadWatch()
    watch.prompt("L0c0", ["L0c0-1"], "L0c0-1 runprobe {}")
    watch.prompt("L0c0", ["L0c0-2"], "summary «L0c0-1 runprobe» then L0c0-2 runprobe {}")
    assert watch.problems == []
    watch.prompt("L0c0", ["L0c0-3"], "L0c0-3 runprobe {}")
    assert any("no longer shows" in p for p in watch.problems)
    watch.prompt("L0o", ["L0o-1"], "L0o-1 runprobe {} and a summary «L0c1-4»")
    assert any("of another thread" in p for p in watch.problems)


def test_a_run_that_ended_end_turn_without_its_reply_is_named() -> None:
    runs, records, threads, run_messages, steps = _world()
    runs[0].answer = "end-L0o-1"
    run_messages["run-1"][1].text = "swell end-L0o-1"
    assert check_runs(runs, records, run_messages, threads, steps) == []
    run_messages["run-1"][1].text = "swell end-L0o-"
    problems = check_runs(runs, records, run_messages, threads, steps)
    assert len(problems) == 1 and "no such reply" in problems[0]


def _calls() -> tuple[dict[tuple[str, str | None], list[Shown]], dict[str, list[Listed]]]:
    threads: dict[tuple[str, str | None], list[Shown]] = {
        (A, C): [
            Shown("m1", "run-1", "approval_request_message", "t1"),
            Shown("m2", "run-1", "tool_call_message", "t2"),
            Shown("m3", "run-2", "approval_response_message"),
            Shown("m4", "run-2", "tool_return_message", "t1", "success", "found"),
            Shown("m5", "run-2", "tool_return_message", "t2", "success", "found"),
        ]
    }
    every = {
        A: [
            Listed("run-1", A, C, "completed", "requires_approval", (1, 1, 1), 2.0, 1.0),
            Listed("run-2", A, C, "completed", "end_turn", (1, 1, 1), 4.0, 3.0),
        ]
    }
    return threads, every


def test_every_call_of_a_thread_gets_one_result() -> None:
    threads, every = _calls()
    answers = [Answer(A, C, "t1", "approve", acked=True)]
    assert check_calls_answered(threads, every, answers) == []
    del threads[(A, C)][4]  # the call that needed no approval never ran
    problems = check_calls_answered(threads, every, answers)
    assert len(problems) == 1 and "call t2 of run run-1 has 0 result(s)" in problems[0]


def test_calls_still_waiting_for_an_answer_are_excused() -> None:
    threads, every = _calls()
    threads[(A, C)] = threads[(A, C)][:2]
    assert check_calls_answered(threads, every, []) == []
    threads[(A, C)].append(Shown("m9", "run-3", "tool_return_message", "t9", "success", "x"))
    assert "answer no call" in check_calls_answered(threads, every, [])[0]


def test_a_compaction_answers_what_it_did() -> None:
    clipped = "x" * 300 + "... [truncated]"
    good = [
        Compacted("L0o", "sliding_window", 300, 0.3, True, 9, 4, clipped),
        Compacted("L0o", "all", None, 0.3, True, 7, 1, "y" * 2000),
        Compacted("L0o", "all", 300, 0.3, True, 1, 1, "z" * 2000),  # nothing to do
    ]
    assert check_compactions(good, 40) == []
    bad = [
        Compacted("L0o", "sliding_window", 300, 0.3, True, 9, 4, clipped[1:]),
        Compacted("L0o", "all", None, 0.3, True, 7, 3, "y" * 2000),
        Compacted("L0o", "sliding_window", None, 0.05, True, 9, 4, "y"),
        Compacted("L0o", "sliding_window", None, 0.3, False, 3, 5, "y"),
    ]
    problems = check_compactions(bad, 40)
    assert len(problems) == 4, problems


def test_a_compaction_answers_the_context_it_left() -> None:
    """The answer's ``num_messages_after`` is the size of the context the database holds once
    it is answered (peeked at for idle threads; None: not peeked)."""
    summary = "y" * 2000
    good = [
        Compacted("L0o", "sliding_window", None, 0.3, True, 9, 4, summary, stored=4),
        Compacted("L0o", "sliding_window", None, 0.3, True, 5, 5, summary, stored=5),
        Compacted("L0o", "sliding_window", None, 0.3, True, 9, 4, summary, stored=None),
    ]
    assert check_compactions(good, 40) == []
    # a context that shrank, answered as if nothing had been compacted
    bad = [Compacted("L0o", "sliding_window", None, 0.3, True, 9, 9, summary, stored=4)]
    (problem,) = check_compactions(bad, 40)
    assert "num_messages_after=9, the stored context holds 4" in problem


def test_conversations_by_last_message_follow_their_latest_input() -> None:
    def run(rid: str, conv: str, at: float) -> Listed:
        return Listed(rid, "a", conv, "completed", "end_turn", (1, 1, 1), at + 1, at)

    every = [run("r1", "c1", 10.0), run("r2", "c2", 20.0), run("r3", "c1", 30.0)]
    starts = {
        "r1": [Shown("m1", "r1", "user_message")],
        "r2": [Shown("m2", "r2", "user_message")],
        "r3": [Shown("m3", "r3", "approval_response_message")],  # no input's run
    }
    good = [("c2", 20.0), ("c1", 10.0), ("c0", None)]  # desc, nulls last
    assert check_last_message_order("a", every, good, True, starts) == []
    asc = [("c1", 10.0), ("c2", 20.0), ("c0", None)]
    assert check_last_message_order("a", every, asc, False, starts) == []
    (order,) = check_last_message_order("a", every, asc, True, starts)
    assert "by last_message_at (desc) come as ['c1', 'c2', 'c0']" in order
    stale = [("c2", 15.0), ("c1", 10.0)]  # c2's input at 20 did not move it
    (problem,) = check_last_message_order("a", every, stale, True, starts)
    assert "c2 shows last_message_at 15.0, before its input that started a run at 20.0" in problem
