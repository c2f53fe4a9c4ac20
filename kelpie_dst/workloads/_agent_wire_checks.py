"""The WIRE oracle's pure checks (``wire``, via HTTP; ``_agent_wire`` drives).

Two contracts a user of kelpie_agent's server can state without reading its code:

**The HTTP server's refusals are the documented ones, and harm nothing else**
(docs/http-server.md, "Options" and "What the server answers itself";
``http_refusals_documented``). A request inside every limit is served by the app, whatever
its shape: a body of exactly ``max_body_bytes`` (declared or chunked), a head that arrives in
pieces within ``header_timeout``, a body that pauses longer than ``header_timeout`` but less
than ``body_timeout``, HTTP/1.0, two requests pipelined in one write; and the connection then
serves the next request (HTTP/1.1), or is closed (HTTP/1.0). A request over a limit gets its
documented status (413 for a body larger than ``max_body_bytes``, declared or chunked in
pieces each under it; 431 for a head over ``max_header_bytes``; 408 for a head slower than
``header_timeout`` or a body that stalls for ``body_timeout``; 505 for a version other than
1.0 and 1.1), with a JSON ``{"detail": ...}`` body and ``connection: close``; the server closes
the connection, the refused change is not applied, and the node serves the next connection.
A request on another connection while a slow one waits is served at once.

**Every view of a message history agrees** (docs/http-api.md, "Messages";
``message_views_agree``). A JSON answer, a stream and a history read with
``use_assistant_message=false`` show ``send_message`` as a tool call (never an
``assistant_message``); with ``true`` as an ``assistant_message`` (never a ``send_message``
call), and the two readings of one history differ by exactly that: the same ids, less the
successful ``send_message`` returns. Every ``tool_return_message`` answers, by
``tool_call_id``, a tool call of its run shown before it, and no call is answered twice. A
listing with ``include_return_message_types`` is the unfiltered history filtered by type and
cut at ``limit``, both orders. A conversation's messages are exactly the turns sent to it (no
other conversation's, not the agent's own history's), and the agent's history holds none of
its conversations' turns. ``runs.list(conversation_id=C)`` lists runs of C only, and every
acknowledged run of C. A list read newest first is the list read oldest first, reversed
(a run's steps and messages, a conversation's messages).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ._wire_threads import FollowSeen, check_follows

__all__ = [
    "ABANDONED",
    "ANSWERED",
    "IDLE",
    "SERVED",
    "Answer",
    "MsgSeen",
    "OrderSeen",
    "RunsSeen",
    "ThreadSeen",
    "TypedSeen",
    "WireLog",
    "WireSeen",
    "check_message_views",
    "check_wire",
]

SERVED = 0
"""``WireSeen.want`` for a request inside every limit: the app answers it (2xx)."""
ANSWERED = -1
"""``WireSeen.want`` for a request the app answers as it likes (a HEAD): only what follows it
on the connection is judged."""
IDLE = -2
"""``WireSeen.want`` for a connection left idle: only how the server closes it is judged."""
ABANDONED = -3
"""``WireSeen.want`` for a request whose client closed the connection before its whole body
was sent (``wire_cut_bodies``): the server must not act on it (``applied`` must not be true).
Half a body is not a request: nothing the server does with it can be what the client meant."""


@attrs.frozen
class WireSeen:
    """One raw request and what came back.

    ``want``: ``SERVED`` or the refusal's documented status. ``status``: the answer's
    (``None``: the connection closed without one). ``detail``: the body is a JSON object with a
    string ``detail``. ``closes``: the answer carried ``connection: close``. ``closed``: the
    server closed the connection after it (``None``: not looked at). ``after``: the next
    request (on the same connection when served, on a new one when refused) answered what it
    asked (``None``: unknown, a fault came between). ``applied``: the request's change is in
    the state read afterwards (``None``: not looked at). ``want_closed``: whether a served
    request's connection must close (HTTP/1.0) or stay open."""

    what: str
    want: int
    status: int | None
    detail: bool = False
    closes: bool = False
    closed: bool | None = None
    after: bool | None = None
    applied: bool | None = None
    want_closed: bool | None = None
    interim: tuple[int, ...] = ()  # the 1xx answers before the final one
    want_interim: tuple[int, ...] | None = None  # None: not judged
    quiet: bool | None = None  # an idle connection closed without a byte (None: not judged)


@attrs.frozen
class MsgSeen:
    """One message as the API showed it (JSON): ``tool`` and ``call_id`` for tool calls and
    returns, ``status`` for returns."""

    id: str
    type: str
    run_id: str | None = None
    otid: str | None = None
    tool: str | None = None
    call_id: str | None = None
    status: str | None = None


@attrs.frozen
class Answer:
    """A JSON answer's messages or a stream's message frames, and what the request asked."""

    what: str
    use_assistant: bool
    types: tuple[str, ...] | None
    messages: tuple[MsgSeen, ...]
    ending: tuple[str, ...] = ()  # the stop_reason / usage_statistics frames, in order


@attrs.frozen
class TypedSeen:
    """A history read with ``include_return_message_types`` and the unfiltered history (oldest
    first) read with the same ``use_assistant_message`` just before it."""

    what: str
    types: tuple[str, ...]
    limit: int
    order: str
    got: tuple[str, ...]
    full: tuple[str, ...]
    full_types: tuple[str, ...]


@attrs.frozen
class ThreadSeen:
    """A thread's (the agent's history or a conversation's) user turns: the otids the
    workload had acknowledged in it, those it sent elsewhere, and what its listing showed."""

    what: str
    mine: frozenset[str]
    others: frozenset[str]
    listed: tuple[MsgSeen, ...]


@attrs.frozen
class RunsSeen:
    """``runs.list(agent_id, conversation_id)``: the acknowledged runs of that conversation
    and the listed ``(run id, conversation id)`` pairs."""

    what: str
    conversation: str
    acked: frozenset[str]
    listed: tuple[tuple[str, str | None], ...]


@attrs.frozen
class OrderSeen:
    what: str
    asc: tuple[str, ...]
    desc: tuple[str, ...]


@attrs.define
class WireLog:
    probes: list[WireSeen] = attrs.field(factory=list)
    answers: list[Answer] = attrs.field(factory=list)
    histories: list[tuple[str, tuple[MsgSeen, ...], tuple[MsgSeen, ...]]] = attrs.field(
        factory=list
    )  # (what, read with use_assistant_message=false, with true), oldest first
    typed: list[TypedSeen] = attrs.field(factory=list)
    threads: list[ThreadSeen] = attrs.field(factory=list)
    runs: list[RunsSeen] = attrs.field(factory=list)
    orders: list[OrderSeen] = attrs.field(factory=list)
    retrieved: list[tuple[str, str, tuple[tuple[str, str], ...]]] = attrs.field(factory=list)
    # (message id, the type the history shows it as, what GET /v1/messages/{id} gave: (id, type))
    refusals: list[tuple[str, int, int | None]] = attrs.field(factory=list)
    # (what, the documented status, the status answered; None: no answer came)
    problems: list[str] = attrs.field(factory=list)  # requests that failed for good
    follows: list[FollowSeen] = attrs.field(factory=list)  # wire_threads (_wire_threads)
    stuck: list[str] = attrs.field(factory=list)  # raw probes no node answered


# -- the HTTP server ---------------------------------------------------------------------------
def check_wire(log: WireLog) -> list[str]:
    out: list[str] = list(log.stuck)
    for p in log.probes:
        if p.want_interim is not None and p.interim != p.want_interim:
            out.append(
                f"{p.what}: the interim answers were {list(p.interim)}, not {list(p.want_interim)}"
            )
        if p.quiet is False:
            out.append(f"{p.what}: the server wrote to the idle connection before closing it")
        if p.want == ABANDONED:
            if p.applied:
                out.append(f"{p.what}: the client closed mid-body, but the change was stored")
            continue
        if p.want == IDLE:
            if p.closed is False:
                out.append(f"{p.what}: the server kept the idle connection open")
            continue
        if p.status is None:
            out.append(f"{p.what}: the connection closed without an answer")
            continue
        if p.want == ANSWERED:
            if p.after is False:
                out.append(f"{p.what}: the next request on the connection got a wrong answer")
            continue
        if p.want == SERVED:
            if not 200 <= p.status < 300:
                out.append(f"{p.what}: answered {p.status}; it is inside every limit")
                continue
            if p.after is False:
                out.append(f"{p.what}: the next request on the connection got a wrong answer")
            if p.applied is False:
                out.append(f"{p.what}: answered {p.status} but its change is not stored")
            if p.want_closed is not None and p.closed is not None and p.closed != p.want_closed:
                state = "closed" if p.closed else "kept open"
                out.append(f"{p.what}: the server {state} the connection")
            continue
        if p.status != p.want:
            out.append(f"{p.what}: answered {p.status}, not {p.want}")
            continue
        if not p.detail:
            out.append(f"{p.what}: the {p.status} has no JSON detail")
        if not p.closes:
            out.append(f"{p.what}: the {p.status} lacks connection: close")
        if p.closed is False:
            out.append(f"{p.what}: the server kept the connection open after its {p.status}")
        if p.applied:
            out.append(f"{p.what}: refused {p.status}, but its change was stored")
        if p.after is False:
            out.append(f"{p.what}: the node answered the next connection wrongly")
    return out


# -- the message views -------------------------------------------------------------------------
def _pairing(what: str, messages: Sequence[MsgSeen]) -> list[str]:
    """Each tool return answers an earlier call of its run (by tool_call_id), at most once."""
    out: list[str] = []
    calls: dict[str, str | None] = {}
    answered: set[str] = set()
    for m in messages:
        if m.type in ("tool_call_message", "approval_request_message") and m.call_id:
            calls[m.call_id] = m.run_id
        elif m.type == "tool_return_message":
            cid = m.call_id or ""
            if cid not in calls:
                out.append(f"{what}: tool return {m.id} answers {cid!r}, no call shown before it")
            elif calls[cid] != m.run_id:
                out.append(f"{what}: tool return {m.id} answers a call of another run")
            elif cid in answered:
                out.append(f"{what}: call {cid!r} answered twice")
            answered.add(cid)
    return out


def _rendering(what: str, use_assistant: bool, messages: Sequence[MsgSeen]) -> list[str]:
    out: list[str] = []
    for m in messages:
        if use_assistant and m.type == "tool_call_message" and m.tool == "send_message":
            out.append(f"{what}: use_assistant_message=true shows a send_message call ({m.id})")
        if not use_assistant and m.type == "assistant_message":
            out.append(f"{what}: use_assistant_message=false shows an assistant_message ({m.id})")
    return out


def check_message_views(log: WireLog) -> list[str]:
    out = list(log.problems)
    for a in log.answers:
        out += _rendering(a.what, a.use_assistant, a.messages)
        if a.types is not None:
            wrong = sorted({m.type for m in a.messages} - set(a.types))
            if wrong:
                out.append(f"{a.what}: asked for {list(a.types)}, got {wrong}")
        elif not a.use_assistant:
            out += _pairing(a.what, a.messages)
        if a.ending and a.ending[-2:] != ("stop_reason", "usage_statistics"):
            out.append(f"{a.what}: ended with {list(a.ending)}")
    for what, raw, shown in log.histories:
        out += _rendering(f"{what} (use_assistant_message=false)", False, raw)
        out += _rendering(f"{what} (use_assistant_message=true)", True, shown)
        out += _pairing(f"{what} (use_assistant_message=false)", raw)
        hidden = [
            m.id
            for m in raw
            if m.type == "tool_return_message"
            and m.tool == "send_message"
            and m.status == "success"
        ]
        want = [m.id for m in raw if m.id not in set(hidden)]
        got = [m.id for m in shown]
        if got != want:
            out.append(
                f"{what}: read with use_assistant_message=true it is {len(got)} messages, "
                f"with false less the send_message returns {len(want)}: they differ"
            )
    for t in log.typed:
        order = list(t.full) if t.order == "asc" else list(reversed(t.full))
        kinds = dict(zip(t.full, t.full_types, strict=True))
        want = [i for i in order if kinds[i] in t.types][: t.limit]
        if list(t.got) != want:
            out.append(
                f"{t.what}: include_return_message_types={list(t.types)} limit={t.limit} "
                f"order={t.order} listed {list(t.got)}, the history filtered gives {want}"
            )
    for th in log.threads:
        otids = [m.otid for m in th.listed if m.type == "user_message" and m.otid]
        missing = sorted(th.mine - set(otids))
        foreign = sorted(set(otids) & th.others)
        if missing:
            out.append(f"{th.what}: the acknowledged turns {missing} are not listed")
        if foreign:
            out.append(f"{th.what}: lists turns sent elsewhere: {foreign}")
    for r in log.runs:
        wrong = sorted(i for i, c in r.listed if c != r.conversation)
        missing = sorted(r.acked - {i for i, _ in r.listed})
        if wrong:
            out.append(f"{r.what}: lists runs of another conversation: {wrong}")
        if missing:
            out.append(f"{r.what}: does not list the acknowledged runs {missing}")
    for mid, kind, retrieved in log.retrieved:
        if not retrieved or any(i != mid for i, _ in retrieved) or retrieved[0][1] != kind:
            shown_as = list(retrieved)
            out.append(f"GET /v1/messages/{mid} gave {shown_as}; the history shows a {kind}")
    for what, documented, status in log.refusals:
        if status is not None and status != documented:
            out.append(f"{what}: answered {status}, not {documented}")
    for o in log.orders:
        if list(o.desc) != list(reversed(o.asc)):
            out.append(f"{o.what}: newest first {list(o.desc)} is not oldest first reversed")
    return out + check_follows(log.follows)
