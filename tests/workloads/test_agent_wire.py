"""agent_http_wire: raw requests at and over the HTTP server's limits, and the message views of
a memgpt agent and its conversations, under faults. The scenario passes and repeats its trace;
the oracles name hand-made bad histories."""

from __future__ import annotations

import attrs
import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_wire import _chunked, _padded
from kelpie_dst.workloads._agent_wire_checks import (
    ABANDONED,
    ANSWERED,
    IDLE,
    SERVED,
    Answer,
    MsgSeen,
    OrderSeen,
    RunsSeen,
    ThreadSeen,
    TypedSeen,
    WireLog,
    WireSeen,
    check_message_views,
    check_wire,
)


@pytest.mark.slow  # two runs of about 4 s of CPU each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_http_wire", [])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["wire.probes"] == 19
    assert first.result.trace_hash == again.result.trace_hash


def test_bodies_are_padded_and_chunked_to_the_byte() -> None:
    body = _padded("wire 1", 1000)
    assert len(body) == 1000 and body.startswith(b'{"value": "wire 1"}')
    chunked = _chunked(b"abcdefghij", 4)
    assert chunked == b"4\r\nabcd\r\n4\r\nefgh\r\n2\r\nij\r\n0\r\n\r\n"


def _probes() -> list[WireSeen]:
    return [
        WireSeen("at the limit", SERVED, 200, after=True, applied=True),
        WireSeen("over the limit", 413, 413, True, True, True, True, False),
        WireSeen("HTTP/1.0", SERVED, 200, closes=True, closed=True, after=True, want_closed=True),
        WireSeen("a slow head", 408, 408, True, True, True, None),
        WireSeen("expect", SERVED, 200, after=True, interim=(100,), want_interim=(100,)),
        WireSeen("a HEAD", ANSWERED, 405, after=True),
        WireSeen("idle", IDLE, None, closed=True, quiet=True),
    ]


def test_documented_refusals_and_served_requests_pass() -> None:
    assert check_wire(WireLog(probes=_probes())) == []


def test_a_refusal_at_the_limit_a_wrong_status_or_a_harmed_connection_is_named() -> None:
    probes = _probes()
    probes[0] = attrs.evolve(probes[0], status=413)  # ">=" for ">"
    probes[1] = attrs.evolve(probes[1], status=200, applied=True)  # a limit not enforced
    probes[2] = attrs.evolve(probes[2], status=505)  # HTTP/1.0 refused
    probes[3] = attrs.evolve(probes[3], closes=False, closed=False, after=False)
    problems = check_wire(WireLog(probes=probes, stuck=["wire probe x: no node answered"]))
    assert problems[0] == "wire probe x: no node answered"
    assert "at the limit: answered 413; it is inside every limit" in problems
    assert "over the limit: answered 200, not 413" in problems
    assert "HTTP/1.0: answered 505; it is inside every limit" in problems
    assert "a slow head: the 408 lacks connection: close" in problems
    assert "a slow head: the server kept the connection open after its 408" in problems
    assert "a slow head: the node answered the next connection wrongly" in problems


def test_a_missing_100_a_framing_slip_and_a_noisy_or_lingering_idle_close_are_named() -> None:
    probes = _probes()
    probes[4] = attrs.evolve(probes[4], interim=())
    probes[5] = attrs.evolve(probes[5], after=False)  # a HEAD answered with a body
    probes[6] = attrs.evolve(probes[6], closed=False)
    probes.append(WireSeen("idle 2", IDLE, 200, closed=True, quiet=False))  # a 408 to idlers
    probes.append(WireSeen("kept", SERVED, 200, closes=True, closed=True, want_closed=False))
    problems = check_wire(WireLog(probes=probes))
    assert problems == [
        "expect: the interim answers were [], not [100]",
        "a HEAD: the next request on the connection got a wrong answer",
        "idle: the server kept the idle connection open",
        "idle 2: the server wrote to the idle connection before closing it",
        "kept: the server closed the connection",
    ]


def test_an_abandoned_body_must_change_nothing() -> None:
    kept = WireSeen("cut, not applied", ABANDONED, None, applied=False)
    unknown = WireSeen("cut, not read back", ABANDONED, None)
    taken = WireSeen("cut, applied", ABANDONED, None, applied=True)
    assert check_wire(WireLog(probes=[kept, unknown])) == []  # no answer is owed
    assert check_wire(WireLog(probes=[kept, taken])) == [
        "cut, applied: the client closed mid-body, but the change was stored"
    ]


@pytest.mark.slow  # two runs of about 6 s of CPU each
def test_the_cut_bodies_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_http_cut_bodies", [])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["wire.probes"] == 21  # agent_http_wire's 19 and the two cut bodies
    assert first.result.trace_hash == again.result.trace_hash


def _m(n: int, kind: str, run: str = "r1", **kw: object) -> MsgSeen:
    return MsgSeen(f"m{n}", kind, run, **kw)  # type: ignore[arg-type]


RAW = (
    _m(1, "user_message", otid="o1"),
    _m(2, "tool_call_message", tool="archival_memory_insert", call_id="c1"),
    _m(3, "tool_return_message", tool="archival_memory_insert", call_id="c1", status="success"),
    _m(4, "user_message"),
    _m(5, "tool_call_message", tool="send_message", call_id="c2"),
    _m(6, "tool_return_message", tool="send_message", call_id="c2", status="success"),
)
SHOWN = (*RAW[:4], _m(5, "assistant_message"))


def _views() -> WireLog:
    log = WireLog()
    log.answers = [
        Answer("json, raw", False, None, RAW, ("stop_reason", "usage_statistics")),
        Answer("stream, shown", True, None, SHOWN, ("stop_reason", "usage_statistics")),
        Answer("typed", True, ("assistant_message",), SHOWN[4:]),
    ]
    log.histories = [("history", RAW, SHOWN)]
    full = tuple(m.id for m in RAW)
    kinds = tuple(m.type for m in RAW)
    log.typed = [
        TypedSeen("users asc", ("user_message",), 2, "asc", ("m1", "m4"), full, kinds),
        TypedSeen("users desc", ("user_message",), 1, "desc", ("m4",), full, kinds),
    ]
    log.threads = [ThreadSeen("conv-1", frozenset({"o1"}), frozenset({"o2"}), RAW)]
    log.runs = [RunsSeen("runs of conv-1", "conv-1", frozenset({"r1"}), (("r1", "conv-1"),))]
    log.orders = [OrderSeen("steps of r1", ("s1", "s2"), ("s2", "s1"))]
    log.retrieved = [("m5", "assistant_message", (("m5", "assistant_message"),))]
    log.refusals = [("a send with assistant_message_tool_name='reply'", 422, 422)]
    return log


def test_consistent_message_views_pass() -> None:
    assert check_message_views(_views()) == []


def test_each_disagreement_between_views_is_named() -> None:
    log = _views()
    wrong_id = attrs.evolve(RAW[2], call_id="m3")  # a return rendered with its own id
    log.answers[0] = attrs.evolve(log.answers[0], messages=(*RAW[:2], wrong_id, *RAW[3:]))
    log.answers[1] = attrs.evolve(log.answers[1], messages=RAW)  # use_assistant_message ignored
    log.answers[2] = attrs.evolve(log.answers[2], messages=SHOWN[3:])  # a type not asked for
    log.histories = [("history", RAW, (*SHOWN, RAW[5]))]
    log.typed[0] = attrs.evolve(log.typed[0], got=("m1", "m1"))  # the next batch repeats
    log.threads[0] = attrs.evolve(log.threads[0], listed=(_m(7, "user_message", otid="o2"),))
    log.runs[0] = attrs.evolve(log.runs[0], listed=(("r2", None),))
    log.orders[0] = attrs.evolve(log.orders[0], desc=("s1", "s2"))
    log.retrieved = [("m5", "assistant_message", (("m5", "tool_call_message"),))]
    log.refusals = [("a send with assistant_message_tool_name='reply'", 422, 200)]
    problems = check_message_views(log)
    text = "\n".join(problems)
    assert "json, raw: tool return m3 answers 'm3', no call shown before it" in text
    assert "stream, shown: use_assistant_message=true shows a send_message call (m5)" in text
    assert "typed: asked for ['assistant_message'], got ['user_message']" in text
    assert "history: read with use_assistant_message=true it is 6 messages" in text
    assert "users asc: include_return_message_types=['user_message'] limit=2" in text
    assert "conv-1: the acknowledged turns ['o1'] are not listed" in text
    assert "conv-1: lists turns sent elsewhere: ['o2']" in text
    assert "runs of conv-1: lists runs of another conversation: ['r2']" in text
    assert "runs of conv-1: does not list the acknowledged runs ['r1']" in text
    assert "steps of r1: newest first ['s1', 's2'] is not oldest first reversed" in text
    assert "GET /v1/messages/m5 gave [('m5', 'tool_call_message')]" in text
    assert "assistant_message_tool_name='reply': answered 200, not 422" in text
