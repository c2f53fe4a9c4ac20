"""agent_message_fields: one message's fields through the API (inputs, the two renderings,
steps, approvals answered over HTTP, pages) under faults. The scenario passes and repeats its
trace; the oracle names hand-made bad histories."""

from __future__ import annotations

import json

import attrs
import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_fields_checks import (
    CLIENT,
    DENY,
    Answer,
    Decision,
    FieldsLog,
    Input,
    Seen,
    Walk,
    check_fields,
    seen,
)


@pytest.mark.slow  # two runs of a few seconds each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_message_fields", ["duration=30s"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["fields.decisions"] > 0
    assert first.result.trace_hash == again.result.trace_hash


D = "2026-01-01T00:00:01+00:00"
CALL = json.dumps(["send_message", json.dumps({"message": "hi"})])


def _log() -> FieldsLog:
    """One consistent history: an input, a step with a reply, an approved-by-client call."""
    user = Seen("m1", "user_message", D, "run-1", None, "o1", "Zoë", "remember café")
    call = Seen("m2", "tool_call_message", D, "run-1", "step-1", payload=CALL)
    call = attrs.evolve(call, tool="send_message", call_id="c1")
    ret = Seen("m3", "tool_return_message", D, "run-1", "step-1", tool="send_message")
    ret = attrs.evolve(ret, call_id="c1", status="success", payload='{"status": "OK"}')
    ask = Seen("m4", "approval_request_message", D, "run-1", "step-1", tool="archival")
    ask = attrs.evolve(ask, call_id="c2", payload="x")
    done = Seen("m5", "tool_return_message", D, "run-2", "step-1", tool="archival")
    done = attrs.evolve(done, call_id="c2", status="error", payload="client ran 1")
    raw = (user, call, ret, ask, done)
    reply = Seen("m2", "assistant_message", D, "run-1", "step-1", payload="hi")
    shown = (user, reply, ask, done)
    log = FieldsLog()
    log.inputs.append(Input("default", "o1", "remember café", "Zoë"))
    log.decisions.append(Decision("default", "c2", "archival", CLIENT, "client ran 1", "error"))
    log.answers.append(Answer("send 0", "default", True, (reply,)))
    log.histories["default"] = (raw, shown)
    log.steps = {"run-1": frozenset({"step-1"}), "run-2": frozenset()}
    ids = ("m1", "m2", "m4", "m5")
    log.walks.append(Walk("pages of 3", 3, ids, (ids[:3], ids[3:], ())))
    log.walks.append(Walk("back by 2", 2, ids, (ids[1:3], ids[:1]), backwards=True))
    return log


def test_a_consistent_history_passes() -> None:
    assert check_fields(_log()) == []


def test_the_two_spellings_of_utc_are_one_date() -> None:
    a = seen({"id": "x", "message_type": "user_message", "date": "2026-01-01T00:00:01Z"})
    b = seen({"id": "x", "message_type": "user_message", "date": "2026-01-01T00:00:01+00:00"})
    assert a.date == b.date


def test_an_input_without_its_name_or_text_or_twice_is_named() -> None:
    log = _log()
    raw, shown = log.histories["default"]
    nameless = attrs.evolve(shown[0], name=None)
    log.histories["default"] = (raw, (nameless, *shown[1:]))
    assert any("name None, sent 'Zoë'" in p for p in check_fields(log))
    log.histories["default"] = (raw, (attrs.evolve(shown[0], payload="remember caf"), *shown[1:]))
    assert any("stored as 'remember caf'" in p for p in check_fields(log))
    log.histories["default"] = (raw, (shown[0], *shown))
    assert any("2 user messages" in p for p in check_fields(log))


def test_renderings_that_disagree_on_a_field_or_hide_a_failed_reply_are_named() -> None:
    log = _log()
    raw, shown = log.histories["default"]
    stepless = attrs.evolve(shown[1], step_id=None)
    log.histories["default"] = (raw, (shown[0], stepless, *shown[2:]))
    problems = check_fields(log)
    assert any("step_id 'step-1' read with use_assistant_message=false" in p for p in problems)
    assert raw is not None
    failed = attrs.evolve(raw[2], status="error")
    log.histories["default"] = ((*raw[:2], failed, *raw[3:]), shown)
    assert any("missing ['m3']" in p for p in check_fields(log))


def test_a_step_no_run_lists_and_an_answer_unlike_the_history_are_named() -> None:
    log = _log()
    log.steps = {"run-1": frozenset({"step-9"})}
    assert any("no run's step" in p for p in check_fields(log))
    log = _log()
    log.answers[0] = Answer(
        "send 0", "default", True, (attrs.evolve(log.answers[0].messages[0], otid="z"),)
    )
    assert any("has otid 'z', the history None" in p for p in check_fields(log))


def test_a_client_result_with_another_status_or_a_denial_that_succeeded_is_named() -> None:
    log = _log()
    raw, shown = log.histories["default"]
    assert raw is not None
    ok = attrs.evolve(raw[4], status="success")
    log.histories["default"] = ((*raw[:4], ok), shown)
    assert any("the client said error, the result is success" in p for p in check_fields(log))
    log = _log()
    log.decisions[0] = Decision("default", "c2", "archival", DENY, "not now", None)
    problems = check_fields(log)
    assert any("lacks the reason 'not now'" in p for p in problems)


def test_a_short_page_before_the_end_and_a_gap_are_named() -> None:
    log = _log()
    ids = log.walks[0].full
    log.walks[0] = Walk("pages of 3", 3, ids, (ids[:2], ids[2:], ()))
    assert any("under limit 3, though more follow" in p for p in check_fields(log))
    log.walks[0] = Walk("pages of 3", 3, ids, (ids[:3], ()))
    assert any("in one page" in p for p in check_fields(log))


def test_a_reply_that_does_not_answer_a_big_input_is_named() -> None:
    log = _log()
    log.big.append(("send big-0", "big-0", "I'll keep that in mind: big-0 (mark-a904): kelp"))
    assert check_fields(log) == []
    log.big.append(("send big-1", "big-1", 'I hear you. You said: "(no messages yet)"'))
    assert any("does not answer the input big-1" in p for p in check_fields(log))


def test_an_answer_that_echoes_the_clients_input_or_approval_is_named() -> None:
    log = _log()
    user = log.histories["default"][0][0]
    answer = Seen("m6", "approval_response_message", D, "run-2", None, "o2")
    log.answers.append(Answer("answer 0", "default", True, (answer, user)))
    problems = check_fields(log)
    assert any("own approval_response_message m6" in p for p in problems), problems
    assert any("own user_message m1" in p for p in problems), problems


def test_a_system_input_is_judged_under_its_own_type_and_never_answered() -> None:
    """input_roles: a system input is stored once as a system_message (it names no step), and
    an answer that holds it echoes the client's own input."""
    log = _log()
    raw, shown = log.histories["default"]
    system = Seen("m0", "system_message", D, "run-1", None, "o1-system", None, "a system note")
    log.histories["default"] = ((system, *raw), (system, *shown))
    log.inputs.insert(0, Input("default", "o1-system", "a system note", None, "system"))
    log.walks.clear()
    assert check_fields(log) == []
    log.answers.append(Answer("send 1", "default", True, (system,)))
    assert any("own system_message m0" in p for p in check_fields(log))
    log.histories["default"] = (raw, shown)  # not stored
    assert any("0 system messages in default" in p for p in check_fields(log))


def test_a_history_read_through_conversation_default_must_be_the_agents() -> None:
    log = _log()
    _, shown = log.histories["default"]
    log.aliased = shown
    assert check_fields(log) == []
    log.aliased = shown[:-1]
    assert any("through conversation default holds 3 messages" in p for p in check_fields(log))


@pytest.mark.parametrize("param", ["input_roles", "default_conversation"])
def test_a_fields_option_without_the_fields_walker_is_one_line(param: str) -> None:
    base = load_scenario("agent_message_fields")
    off = {"message_fields": False, "input_roles": False, "default_conversation": False}
    params = {**base.workload.params, **off, param: True}
    run = run_scenario(attrs.evolve(base, workload=attrs.evolve(base.workload, params=params)), 0)
    assert run.result.failure is not None
    assert f"workload.params.{param}: needs message_fields = true" in run.result.failure.describe()


def test_an_approval_answer_must_be_stored_once_with_its_otid() -> None:
    log = _log()
    raw, shown = log.histories["default"]
    answer = Seen("m6", "approval_response_message", D, "run-2", None, "answer-1")
    log.histories["default"] = ((*raw, answer), (*shown, answer))
    log.approvals.append(("default", "answer-1"))
    assert check_fields(log) == []
    without = attrs.evolve(answer, otid=None)
    log.histories["default"] = ((*raw, without), (*shown, without))
    assert check_fields(log) == [
        "approval answer answer-1: 0 approval_response_messages with its otid in default, not 1"
    ]


def test_a_cut_send_message_shown_as_a_reply_is_named() -> None:
    log = _log()
    raw, shown = log.histories["default"]
    cut = attrs.evolve(raw[1], payload=json.dumps(["send_message", '{"message": "hel']))
    error = attrs.evolve(raw[2], status="error", payload='{"status": "Failed"}')
    raw = (raw[0], cut, error, *raw[3:])
    as_call = (shown[0], cut, error, *shown[2:])
    log.histories["default"] = (raw, as_call)
    log.answers.clear()
    assert check_fields(log) == []
    said = attrs.evolve(shown[1], payload="hel")
    log.histories["default"] = (raw, (shown[0], said, error, *shown[2:]))
    assert any("has no complete message argument" in p for p in check_fields(log))
