"""The approvals workload's wire probes: JSON sent to an ASGI app in-process, judged by the
status it answers (400/422 refused, 2xx accepted, anything else not judged)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from kelpie_agent.agent import ApprovalDecision, InputMessage
from kelpie_agent.service import InvalidError
from kelpie_dst.workloads._approval_wire import (
    Returned,
    WireFailure,
    after_answer,
    answer_json,
    asgi_json,
    before_answer,
    wire_answer,
    wire_probes,
)


def _app(statuses: dict[str, int], seen: list[Any]) -> Any:
    """An ASGI app answering each message's otid with the status ``statuses`` gives it."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        sent = json.loads(body)
        seen.append((scope["method"], scope["path"], sent))
        status = statuses[sent["messages"][0]["otid"]]
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b'{"detail": "x"}'})

    return app


def test_asgi_json_sends_the_body_and_reads_the_answer() -> None:
    seen: list[Any] = []
    body = {"messages": [{"otid": "o"}], "streaming": False}
    got = trio.run(asgi_json, _app({"o": 400}, seen), "POST", "/v1/agents/agent-1/messages", body)
    assert got == (400, {"detail": "x"})
    assert seen == [("POST", "/v1/agents/agent-1/messages", body)]


def test_probes_count_refusals_and_name_each_accepted_answer() -> None:
    probes = before_answer("agent-1", "a0r1") + after_answer("a0r1", "message-7")
    assert [p[1]["otid"] for p in probes] == ["wl-a0r1", "wt-a0r1", "wc-a0r1", "ws-a0r1"]
    assert probes[0][1] == {
        "type": "approval",
        "approve": True,
        "approval_request_id": "message-bogus-a0r1",
        "otid": "wl-a0r1",
    }
    assert probes[3][1]["approval_request_id"] == "message-7"
    statuses = {"wl-a0r1": 400, "wt-a0r1": 200, "wc-a0r1": 422, "ws-a0r1": 503}
    seen: list[Any] = []
    refused, problems = trio.run(wire_probes, _app(statuses, seen), "agent-1", probes)
    assert refused == 2  # the 503 is not judged either way
    assert problems == ["wt-a0r1: a legacy approval naming another call was accepted over HTTP"]
    assert all(s[2]["streaming"] is False for s in seen)


def _answering(status: int, answer: Any, seen: list[Any]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(json.loads((await receive())["body"]))
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    return app


def test_an_answer_goes_as_letta_client_sends_it_and_its_results_come_back() -> None:
    legacy = InputMessage(
        "approval", "no", otid="answer-k", approve=False, approval_request_id="message-3"
    )
    assert answer_json(legacy) == {
        "type": "approval",
        "otid": "answer-k",
        "approve": False,
        "approval_request_id": "message-3",
        "reason": "no",
    }
    current = InputMessage(
        "approval", "", otid="answer-j", approvals=(ApprovalDecision("toolu_1", True),)
    )
    assert answer_json(current)["approvals"] == [
        {"type": "approval", "tool_call_id": "toolu_1", "approve": True}
    ]
    ret = {"message_type": "tool_return_message", "name": "pay", "status": "success"}
    turn = {
        "messages": [{"message_type": "assistant_message"}, ret | {"tool_return": "paid k"}],
        "stop_reason": {"message_type": "stop_reason", "stop_reason": "end_turn"},
    }
    seen: list[Any] = []
    got = trio.run(wire_answer, _answering(200, turn, seen), "agent-1", current)
    assert got == ("end_turn", [Returned("pay", "success", "paid k")])
    assert seen == [{"messages": [answer_json(current)], "streaming": False}]
    with pytest.raises(InvalidError, match="HTTP 400: not waiting"):
        trio.run(wire_answer, _answering(400, {"detail": "not waiting"}, []), "agent-1", current)
    with pytest.raises(WireFailure, match="HTTP 503"):
        trio.run(wire_answer, _answering(503, {"detail": "down"}, []), "agent-1", current)
