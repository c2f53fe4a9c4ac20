"""agent_loop_budgets: the loop's budgets and its model retries (coreJ, session 14). The
scenario passes and repeats its trace; each property names hand-made bad histories and passes
good ones."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_budgets import (
    Attempts,
    check_invalid_streaks,
    check_llm_attempts,
    check_tool_budget,
)
from kelpie_dst.workloads._agent_loop_checks import Send, Stored

SMALL = ["workload.params.span=15", "duration=40s"]


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_loop_budgets", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["loop.acked"] > 5
    assert first.result.trace_hash == again.result.trace_hash


def _call(n: int, run: str, step: str) -> Stored:
    return Stored(f"m{n}", "tool_call_message", "{}", "t", None, f"c{n}", run=run, step=step)


def _result(n: int, run: str, step: str, status: str, text: str = "ok") -> Stored:
    return Stored(f"r{n}", "tool_return_message", text, "t", status, f"c{n}", run=run, step=step)


def _history(*messages: Stored) -> dict[str, Stored]:
    return {m.id: m for m in messages}


REFUSED = '{"status": "Failed", "message": "invalid_tool_call: there is no tool named x"}'


def test_a_run_that_ran_more_calls_than_its_budget_is_named() -> None:
    ok = _history(*(_result(n, "run-1", f"s{n}", "success") for n in range(3)))
    assert check_tool_budget(ok, max_tool_calls=3) == []
    refused = _result(9, "run-1", "s9", "error", REFUSED)
    assert check_tool_budget({**ok, refused.id: refused}, max_tool_calls=3) == []
    over = {**ok, **_history(_result(4, "run-1", "s4", "success"))}
    [problem] = check_tool_budget(over, max_tool_calls=3)
    assert "ran 4 tool calls" in problem
    other_run = {**ok, **_history(_result(4, "run-2", "s4", "success"))}
    assert check_tool_budget(other_run, max_tool_calls=3) == []


def _refused_step(n: int, run: str = "run-1") -> list[Stored]:
    return [_call(n, run, f"s{n}"), _result(n, run, f"s{n}", "error", REFUSED)]


def test_a_run_that_goes_on_after_its_invalid_steps_is_named() -> None:
    three = _history(*_refused_step(1), *_refused_step(2), *_refused_step(3))
    assert check_invalid_streaks(three, max_invalid_steps=3) == []
    four = _history(*_refused_step(1), *_refused_step(2), *_refused_step(3), *_refused_step(4))
    [problem] = check_invalid_streaks(four, max_invalid_steps=3)
    assert "went on after 3 steps in a row" in problem
    # a step with a call that ran breaks the streak; so does a failure that is no refusal
    ran = [_call(5, "run-1", "s5"), _result(5, "run-1", "s5", "success")]
    failed = [_call(6, "run-1", "s6"), _result(6, "run-1", "s6", "error", "Failed: quota")]
    broken = _history(*_refused_step(1), *_refused_step(2), *ran, *_refused_step(3))
    assert check_invalid_streaks(broken, max_invalid_steps=3) == []
    broken = _history(*_refused_step(1), *_refused_step(2), *failed, *_refused_step(3))
    assert check_invalid_streaks(broken, max_invalid_steps=3) == []
    # another run's steps do not count
    mixed = _history(*_refused_step(1), *_refused_step(2), *_refused_step(3, "run-2"))
    assert check_invalid_streaks(mixed, max_invalid_steps=3) == []


def _gave_up(tag: str = "t0-1", seen: int = 10) -> Send:
    send = Send("agent-1", "long", tag, 8, "send")
    send.acked, send.stop_reason, send.seen = True, "llm_api_error", seen
    return send


def _attempts(*outcomes: str, tag: str = "t0-1", last: int = 5, summary: bool = False) -> Attempts:
    return Attempts(tag, summary, list(outcomes), last)


def test_a_run_that_gives_up_on_the_model_too_early_is_named() -> None:
    full = _attempts("overloaded", "cut", "rate_limited", "server_error")
    assert check_llm_attempts([_gave_up()], [full], [], llm_retries=3) == []
    short = _attempts("overloaded", "cut", "overloaded")
    [problem] = check_llm_attempts([_gave_up()], [short], [], llm_retries=3)
    assert "tried 3 time(s)" in problem and "asks for 4" in problem
    # a request the model refused is not retried; a call that succeeded did not end the run
    assert check_llm_attempts([_gave_up()], [_attempts("bad_request")], [], llm_retries=3) == []
    assert check_llm_attempts([_gave_up()], [_attempts("cut", "ok")], [], llm_retries=3) == []
    # a summary request seen after the last call, before the answer: it may have failed
    assert check_llm_attempts([_gave_up()], [short], [7], llm_retries=3) == []
    # only the run's last call counts
    calls = [short, _attempts("overloaded", "overloaded", "cut", "cut", last=8)]
    assert check_llm_attempts([_gave_up()], calls, [], llm_retries=3) == []


def test_a_model_call_tried_more_often_than_allowed_is_named() -> None:
    five = _attempts("overloaded", "cut", "overloaded", "overloaded", "ok")
    [problem] = check_llm_attempts([], [five], [], llm_retries=3)
    assert "tried 5 times" in problem


def test_an_invalid_tool_call_stop_that_was_not_earned_is_named() -> None:
    def stopped(run: str) -> Send:
        send = Send("agent-1", "spree", "t0-1", 6, "send")
        send.acked, send.stop_reason, send.run = True, "invalid_tool_call", run
        return send

    ran = [_call(5, "run-1", "s5"), _result(5, "run-1", "s5", "success")]
    three = _history(*ran, *_refused_step(1), *_refused_step(2), *_refused_step(3))
    check = check_invalid_streaks
    assert check(three, max_invalid_steps=3, sends=[stopped("run-1")]) == []
    two = _history(*_refused_step(1), *ran, *_refused_step(2), *_refused_step(3))
    [problem] = check(two, max_invalid_steps=3, sends=[stopped("run-1")])
    assert "after 2 step(s) in a row" in problem
    # a call without a result (an interrupted step): not judged
    open_call = _history(*ran, *_refused_step(2), *_refused_step(3), _call(7, "run-1", "s7"))
    assert check(open_call, max_invalid_steps=3, sends=[stopped("run-1")]) == []
