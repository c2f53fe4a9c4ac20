"""The FIELDS oracle's pure checks (``message_fields``, via HTTP; ``_agent_fields`` drives).

What a user of the messages API can state about one message's fields, without reading the
server's code (docs/api.md, "Messages"; letta-compat.md):

* **An input is stored as it was sent.** Each acknowledged input (a ``user`` message with an
  ``otid``) is in the history of the thread it was sent to exactly once, with the content,
  ``name`` and ``otid`` the client sent (non-ASCII text included), and in no other thread.
* **The two renderings of one message agree.** Read with ``use_assistant_message`` true and
  false, a history holds the same ids less the successful ``send_message`` returns; a message
  shown both ways has the same ``date``, ``run_id``, ``step_id`` and ``otid``; a
  ``send_message`` call is shown as an ``assistant_message`` carrying its ``message`` argument;
  one whose arguments are not a JSON object with a string ``message`` (cut off at
  ``max_tokens``) said nothing and is shown as the ``tool_call_message`` it is (rtU).
* **A model step's messages name their step.** Every reasoning, assistant, tool call,
  approval request and tool return message of a run has a ``step_id``, and it is a step that
  ``GET /v1/runs/{id}/steps`` lists for one of the thread's runs.
* **An answer shows what is stored.** Each message of a JSON answer or a stream (no token
  streaming) is in its thread's history, read with the same ``use_assistant_message``, under
  its id, with the same type, run, step, otid, name and payload.
* **A client's answer to an approval is what the call returns.** A result the client ran
  itself is stored as the call's one result with the client's ``status`` and text; a denial is
  an ``error`` result carrying the reason; an approval makes exactly one result.
* **The newest input is always shown.** An input larger than the agent's whole history budget
  (a letta_v1 agent with a 1,000-token window: the loop's floor of 4,000 characters) is still
  shown to the model, alone: its reply (the simulated model's ``I'll keep that in mind: ...``)
  answers it.
* **A page is short only at the end.** Paged by ``after`` cursors (and backwards by
  ``before``), a history reads the same as in one page; every page holds ``limit`` messages
  except the last.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

__all__ = [
    "APPROVE",
    "CLIENT",
    "DENY",
    "Decision",
    "FieldsLog",
    "Input",
    "Seen",
    "Walk",
    "check_fields",
    "seen",
]

CLIENT = "client"
DENY = "deny"
APPROVE = "approve"
_STEP_TYPES = frozenset(
    {
        "reasoning_message",
        "assistant_message",
        "tool_call_message",
        "approval_request_message",
        "tool_return_message",
    }
)


@attrs.frozen
class Seen:
    """One message as a client read it (the fields these checks compare)."""

    id: str
    type: str
    date: str | None = None
    run_id: str | None = None
    step_id: str | None = None
    otid: str | None = None
    name: str | None = None
    payload: str | None = None  # content, reasoning, the call (name, arguments) or the return
    tool: str | None = None  # a call's or a return's tool
    call_id: str | None = None
    status: str | None = None


def _instant(value: Any) -> str | None:
    """A date as one spelling of its instant (``Z`` and ``+00:00`` are the same)."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return value


def seen(m: Mapping[str, Any]) -> Seen:
    """A message of the API's JSON as :class:`Seen`."""
    kind = str(m.get("message_type"))
    call = m.get("tool_call") if isinstance(m.get("tool_call"), dict) else None
    tool = call.get("name") if call else None
    call_id = call.get("tool_call_id") if call else None
    payload: Any = m.get("content", m.get("reasoning"))
    if call is not None:
        payload = json.dumps([call.get("name"), call.get("arguments")])
    if kind == "tool_return_message":
        tool, call_id, payload = m.get("name"), m.get("tool_call_id"), m.get("tool_return")
    return Seen(
        id=str(m.get("id")),
        type=kind,
        date=_instant(m.get("date")),
        run_id=m.get("run_id"),
        step_id=m.get("step_id"),
        otid=m.get("otid"),
        name=m.get("name"),
        payload=payload if isinstance(payload, str) or payload is None else str(payload),
        tool=tool,
        call_id=call_id,
        status=m.get("status"),
    )


@attrs.frozen
class Input:
    """An acknowledged user input: the thread it went to and what was sent."""

    thread: str
    otid: str
    content: str
    name: str | None
    role: str = "user"  # user, or (param input_roles) system or assistant


@attrs.frozen
class Decision:
    """The client's acknowledged answer to one approval request."""

    thread: str
    call_id: str
    tool: str
    kind: str  # CLIENT, DENY or APPROVE
    text: str | None = None  # the client's result, or the denial's reason
    status: str | None = None  # a client's result's status


@attrs.frozen
class Walk:
    """A history read in pages: ``pages`` in the order read; ``full`` the one-page reading
    in the walk's order; ``backwards``: by ``before`` cursors, from the last item back."""

    what: str
    limit: int
    full: tuple[str, ...]
    pages: tuple[tuple[str, ...], ...]
    backwards: bool = False


@attrs.frozen
class Answer:
    what: str
    thread: str
    use_assistant: bool
    messages: tuple[Seen, ...]


@attrs.define
class FieldsLog:
    inputs: list[Input] = attrs.Factory(list)
    # default_conversation: the agent's history read through conversation "default"
    aliased: tuple[Seen, ...] | None = None
    decisions: list[Decision] = attrs.Factory(list)
    # (thread, otid): approval answers acknowledged, each sent with an otid of its own
    approvals: list[tuple[str, str]] = attrs.Factory(list)
    answers: list[Answer] = attrs.Factory(list)
    # thread -> (read with use_assistant_message=false, read with true), oldest first; a
    # conversation's messages are read one way only (true: the route has no such parameter)
    histories: dict[str, tuple[tuple[Seen, ...] | None, tuple[Seen, ...]]] = attrs.Factory(dict)
    steps: dict[str, frozenset[str]] = attrs.Factory(dict)  # run id -> its steps' ids
    walks: list[Walk] = attrs.Factory(list)
    # (what, the input's tag, the reply's text): an input larger than the agent's history
    # budget, and what the agent answered it
    big: list[tuple[str, str, str]] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)


def _send_text(payload: str | None) -> str | None:
    """The ``message`` argument of a ``send_message`` call's payload, if it is a string."""
    try:
        _, arguments = json.loads(payload or "")
        message = json.loads(arguments).get("message")
    except (ValueError, TypeError, AttributeError):
        return None
    return message if isinstance(message, str) else None


def _inputs(log: FieldsLog) -> list[str]:
    out = []
    for sent in log.inputs:
        for thread, (_, shown) in log.histories.items():
            kind = f"{sent.role}_message"
            found = [m for m in shown if m.type == kind and m.otid == sent.otid]
            if thread != sent.thread:
                if found:
                    out.append(f"input {sent.otid} (sent to {sent.thread}) is in {thread} too")
                continue
            if len(found) != 1:
                out.append(
                    f"input {sent.otid}: {len(found)} {sent.role} messages in {thread}, not 1"
                )
                continue
            m = found[0]
            if m.payload != sent.content:
                out.append(f"input {sent.otid}: stored as {m.payload!r}, sent {sent.content!r}")
            if m.name != sent.name:
                out.append(f"input {sent.otid}: name {m.name!r}, sent {sent.name!r}")
    return out


def _approval_answers(log: FieldsLog) -> list[str]:
    """An acknowledged approval answer is stored once, in its thread, with the otid it was
    sent with (a retry after a lost reply finds it by that otid, Letta's exactly once)."""
    out = []
    for thread, otid in log.approvals:
        if thread not in log.histories:
            continue
        _, shown = log.histories[thread]
        found = [m for m in shown if m.type == "approval_response_message" and m.otid == otid]
        if len(found) != 1:
            out.append(
                f"approval answer {otid}: {len(found)} approval_response_messages with its "
                f"otid in {thread}, not 1"
            )
    return out


def _views(thread: str, raw: Sequence[Seen], shown: Sequence[Seen]) -> list[str]:
    out = []
    hidden = {
        m.id
        for m in raw
        if m.type == "tool_return_message" and m.tool == "send_message" and m.status == "success"
    }
    want = [m.id for m in raw if m.id not in hidden]
    got = [m.id for m in shown]
    if got != want:
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        out.append(
            f"{thread}: read with use_assistant_message=true it is the reading with false less "
            f"the successful send_message returns? missing {missing}, extra {extra}"
        )
    by_id = {m.id: m for m in shown}
    for r in raw:
        s = by_id.get(r.id)
        if s is None:
            continue
        for field in ("date", "run_id", "step_id", "otid"):
            if getattr(r, field) != getattr(s, field):
                out.append(
                    f"{thread}: message {r.id} has {field} {getattr(r, field)!r} read with "
                    f"use_assistant_message=false, {getattr(s, field)!r} with true"
                )
        text = _send_text(r.payload) if r.tool == "send_message" and r.call_id else None
        shown_as = (s.type, s.payload)
        if (
            r.type == "tool_call_message"
            and r.tool == "send_message"
            and text is None
            and s.type != "tool_call_message"
        ):  # a call cut off (or malformed) said nothing: it is shown as the call it is
            out.append(
                f"{thread}: send_message call {r.id} has no complete message argument "
                f"({r.payload!r}) but is shown as {s.type} {s.payload!r}"
            )
        if (
            r.type == "tool_call_message"
            and text is not None
            and shown_as
            != (
                "assistant_message",
                text,
            )
        ):
            out.append(
                f"{thread}: send_message call {r.id} is shown as {s.type} {s.payload!r}, "
                f"not as the assistant_message {text!r}"
            )
    return out


def _steps(
    thread: str,
    raw: Sequence[Seen],
    steps: Mapping[str, frozenset[str]],
    inputs: frozenset[str] = frozenset(),
) -> list[str]:
    """Every model step's message names a step the runs list. Not necessarily its own run's:
    the result of a call answered by an approval is stored by the run the answer started, under
    the step that made the call (an earlier run's). ``inputs``: the otids of the client's own
    inputs, which no step made."""
    out = []
    known = frozenset().union(*steps.values()) if steps else frozenset()
    for m in raw:
        if m.type not in _STEP_TYPES or m.run_id is None or m.otid in inputs:
            continue  # a new agent's first messages belong to no run; an input to no step
        if m.step_id is None:
            out.append(f"{thread}: {m.type} {m.id} of run {m.run_id} names no step")
        elif m.step_id not in known:
            out.append(f"{thread}: {m.type} {m.id} names step {m.step_id}, no run's step")
    return out


def _answers(log: FieldsLog) -> list[str]:
    out = []
    for a in log.answers:
        raw, shown = log.histories.get(a.thread, ((), ()))
        read = shown if a.use_assistant else raw
        if read is None:
            continue
        by_id = {m.id: m for m in read}
        for m in a.messages:
            stored = by_id.get(m.id)
            if stored is None:
                out.append(f"{a.what}: {m.type} {m.id} is not in {a.thread}'s history")
                continue
            for field in ("type", "date", "run_id", "step_id", "otid", "name", "payload"):
                if getattr(m, field) != getattr(stored, field):
                    out.append(
                        f"{a.what}: {m.type} {m.id} has {field} {getattr(m, field)!r}, the "
                        f"history {getattr(stored, field)!r}"
                    )
    return out


def _echoes(log: FieldsLog) -> list[str]:
    """An answer (LettaResponse.messages, or a stream) holds the agent's messages only: never
    the client's own input, a user message or an approval answer (session 18, agtN)."""
    own = {sent.otid for sent in log.inputs if sent.role != "user"}  # system, assistant
    return [
        f"{a.what}: the answer holds the client's own {m.type} {m.id}"
        for a in log.answers
        for m in a.messages
        if m.type in ("user_message", "approval_response_message")
        or (m.otid is not None and m.otid in own)
    ]


def _aliased(log: FieldsLog) -> list[str]:
    """Letta's conversation ``default`` with an agent's id is that agent's own history: read
    through it, the history is the agent's (as shown, with assistant messages)."""
    if log.aliased is None or "default" not in log.histories:
        return []
    _, shown = log.histories["default"]
    if [m.id for m in log.aliased] == [m.id for m in shown]:
        return []
    return [
        f"the agent's history through conversation default holds {len(log.aliased)} messages "
        f"({[m.id for m in log.aliased][:3]}...), its own route {len(shown)} "
        f"({[m.id for m in shown][:3]}...)"
    ]


def _decisions(log: FieldsLog) -> list[str]:
    out = []
    for d in log.decisions:
        raw, _ = log.histories.get(d.thread, ((), ()))
        results = [
            m for m in raw or () if m.type == "tool_return_message" and m.call_id == d.call_id
        ]
        what = f"{d.kind} of {d.tool} call {d.call_id}"
        if len(results) != 1:
            out.append(f"{what}: {len(results)} results in {d.thread}, not 1")
            continue
        r = results[0]
        if d.kind == CLIENT:
            if r.status != d.status:
                out.append(f"{what}: the client said {d.status}, the result is {r.status}")
            if d.text is not None and d.text not in (r.payload or ""):
                out.append(f"{what}: the result {r.payload!r} lacks the client's {d.text!r}")
        elif d.kind == DENY:
            if r.status != "error":
                out.append(f"{what}: denied, but the result is {r.status}")
            if d.text is not None and d.text not in (r.payload or ""):
                out.append(f"{what}: the result {r.payload!r} lacks the reason {d.text!r}")
    return out


def _walks(log: FieldsLog) -> list[str]:
    out = []
    for w in log.walks:
        pages = [list(p) for p in w.pages]
        flat = [i for p in (reversed(pages) if w.backwards else pages) for i in p]
        want = list(w.full[:-1]) if w.backwards and w.full else list(w.full)
        if flat != want:
            out.append(f"{w.what}: read in pages of {w.limit} it is {flat}, in one page {want}")
        for n, page in enumerate(pages):
            if len(page) > w.limit:
                out.append(f"{w.what}: page {n} holds {len(page)} messages, over {w.limit}")
            if 0 < len(page) < w.limit and any(pages[n + 1 :]):
                out.append(
                    f"{w.what}: page {n} holds {len(page)} messages, under limit {w.limit}, "
                    "though more follow"
                )
    return out


def _big(log: FieldsLog) -> list[str]:
    return [
        f"{what}: the reply {reply[:80]!r} does not answer the input {tag} (the model was not "
        "shown it)"
        for what, tag, reply in log.big
        if tag not in reply
    ]


def check_fields(log: FieldsLog) -> list[str]:
    """Every problem the walk shows (empty: the fields held)."""
    out = list(log.problems) + _inputs(log) + _answers(log) + _decisions(log) + _walks(log)
    out += _echoes(log)
    out += _big(log)
    out += _aliased(log)
    out += _approval_answers(log)
    inputs = frozenset(sent.otid for sent in log.inputs)
    for thread, (raw, shown) in log.histories.items():
        if raw is not None:
            out += _views(thread, raw, shown)
        out += _steps(thread, shown if raw is None else raw, log.steps, inputs)
    return out
