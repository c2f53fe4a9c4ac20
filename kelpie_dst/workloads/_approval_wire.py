"""Approvals as letta-client sends them, over the node's REST app (the approvals
workload's ``wire_probes``).

The approvals workload answers through the service in-process, so the REST request models
(``kelpie_agent.api._models_messages``) that turn a client's JSON into an answer never ran
with an answer that must be refused. With ``wire_probes`` on, a probed request also gets,
while its call waits, answers that name something else, as JSON to
``POST /v1/agents/{id}/messages`` of the node's app (in-process ASGI, no network): Letta's
legacy form (``approve: true`` with an ``approval_request_id`` that is neither the waiting
request's message id nor one of its calls' ids, in the shape of each) and the current one
(``approvals`` with an unknown ``tool_call_id``); and, after its answer, the legacy form
naming the request just answered. Each must be refused (400) and run nothing: an answer is
applied only to the request it names (docs/http-api.md, approvals). With ``wire_answers`` on,
the answers themselves go the same way (``wire_answer``), so a retried answer (the same otid,
after a crash) is judged through the REST models too.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio

from kelpie_agent.agent import InputMessage, ToolReturnMessage
from kelpie_agent.errors import KelpieError
from kelpie_agent.service import InvalidError

__all__ = [
    "Returned",
    "WireFailure",
    "after_answer",
    "answer_json",
    "asgi_json",
    "before_answer",
    "returns_of",
    "wire_answer",
    "wire_probes",
]

Asgi = Any  # an ASGI app: await app(scope, receive, send)


@attrs.frozen
class Returned:
    """A tool result an answered run showed: the tool's name, its status and its text."""

    name: str | None
    status: str
    tool_return: str


class WireFailure(KelpieError):
    """The REST app answered neither the turn nor a refusal (a node or storage failure): the
    client tries again later, with the same otid."""


def returns_of(messages: Any) -> list[Returned]:
    """The tool results among an in-process turn's messages."""
    return [
        Returned(m.name, m.status, m.tool_return)
        for m in messages
        if isinstance(m, ToolReturnMessage)
    ]


def answer_json(message: InputMessage) -> dict[str, Any]:
    """``message`` (an approval answer) as letta-client sends it."""
    out: dict[str, Any] = {"type": "approval", "otid": message.otid}
    if message.approvals:
        out["approvals"] = [
            {"type": "approval", "tool_call_id": d.tool_call_id, "approve": d.approve}
            | ({"reason": d.reason} if d.reason is not None else {})
            for d in message.approvals
        ]
        return out
    out["approve"] = message.approve
    out["approval_request_id"] = message.approval_request_id
    if message.content:
        out["reason"] = message.content
    return out


async def wire_answer(app: Asgi, agent: str, message: InputMessage) -> tuple[str, list[Returned]]:
    """Send the answer to ``agent`` through ``app``: ``(stop reason, tool results)``.
    ``InvalidError`` when it is refused (400, 422), ``WireFailure`` for any other failure."""
    body = {"messages": [answer_json(message)], "streaming": False}
    status, got = await asgi_json(app, "POST", f"/v1/agents/{agent}/messages", body)
    detail = got.get("detail") if isinstance(got, dict) else got
    if status in (400, 422):
        raise InvalidError(None, f"HTTP {status}: {detail}", status=status)
    if status != 200 or not isinstance(got, dict):
        raise WireFailure(f"HTTP {status}: {detail}")
    returned = [
        Returned(m.get("name"), str(m.get("status")), str(m.get("tool_return")))
        for m in got.get("messages", [])
        if m.get("message_type") == "tool_return_message"
    ]
    return str(got.get("stop_reason", {}).get("stop_reason")), returned


async def asgi_json(app: Asgi, method: str, path: str, body: Any) -> tuple[int, Any]:
    """One JSON request to ``app`` in-process: ``(status, parsed body or None)``."""
    payload = json.dumps(body).encode()
    answered = trio.Event()
    pending = [{"type": "http.request", "body": payload, "more_body": False}]
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await answered.wait()  # as a server does: the client goes once it has the answer
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                answered.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"host", b"server")],
        "client": ("client", 1),
        "server": ("server", 80),
        "state": {},
    }
    await app(scope, receive, send)
    answered.set()
    raw = b"".join(chunks)
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def _legacy(request_id: str, otid: str) -> dict[str, Any]:
    return {"type": "approval", "approve": True, "approval_request_id": request_id, "otid": otid}


def _current(call_id: str, otid: str) -> dict[str, Any]:
    answer = {"type": "approval", "tool_call_id": call_id, "approve": True}
    return {"type": "approval", "approvals": [answer], "otid": otid}


def before_answer(agent: str, key: str) -> list[tuple[str, dict[str, Any]]]:
    """The probes sent while ``key``'s call waits: ``(what, message)``."""
    return [
        ("a legacy approval naming another request", _legacy(f"message-bogus-{key}", f"wl-{key}")),
        ("a legacy approval naming another call", _legacy(f"toolu_wire_{key}", f"wt-{key}")),
        ("an approval of an unknown call", _current(f"toolu_wire_{key}", f"wc-{key}")),
    ]


def after_answer(key: str, request_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The probe sent once ``key``'s answer was acknowledged: its request, named again."""
    return [("a legacy approval of an answered request", _legacy(request_id, f"ws-{key}"))]


async def wire_probes(
    app: Asgi, agent: str, probes: list[tuple[str, dict[str, Any]]]
) -> tuple[int, list[str]]:
    """Send each probe; ``(refused, problems)``. A 400 or 422 is a refusal, a 2xx an answer
    accepted (a problem); anything else (a node or storage failure) is not judged."""
    refused, problems = 0, []
    for what, message in probes:
        body = {"messages": [message], "streaming": False}
        status, _ = await asgi_json(app, "POST", f"/v1/agents/{agent}/messages", body)
        if status in (400, 422):
            refused += 1
        elif 200 <= status < 300:
            problems.append(f"{message['otid']}: {what} was accepted over HTTP")
    return refused, problems
