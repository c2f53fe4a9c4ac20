"""The agent workload's HTTP link: the unmodified ``letta_client`` SDK (``AsyncLetta``) speaks
Letta's REST API, JSON and SSE, to each server node's HTTP server over the simulated network,
so network faults, crashes and partitions hit real request bytes.

The SDK's own retries are off (``max_retries=0``): the workload retries, on another node, with
the same ``otid``. Server ids are the server's: a create whose outcome was lost is looked up by
the agent's unique name before it is sent again (an orphan from a late first attempt may stay,
unused, as with any client of an API without idempotency keys).
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import letta_client
from letta_client import AsyncLetta
from letta_client._base_client import get_platform

from ._agent_checks import BlockState, Msg
from ._agent_client import AgentPlan, Planned, Sent, join_pieces
from ._agent_runs import BackgroundRuns, IncompleteFollowError
from ._agent_world import PORT

__all__ = ["HttpLink", "IncompleteStreamError", "open_http_link", "unterminated"]

RETRY_STATUS = frozenset({408, 429, 502, 503, 504})
"""Statuses after which the same request may succeed (a 500 is a bug: never retried)."""
HIDDEN = {"heartbeat": "heartbeat", "system_alert": "alert", "login": "login"}

# Each SDK client asks ``get_platform()`` for its headers once; ``distro`` answers the first
# question in a process by running ``lsb_release`` and caches it. Asked here, outside any
# simulation, so the first seed run in a process traces the same events as every later one
# (it used to record one extra redirected ``subprocess.Popen``).
get_platform()


class IncompleteStreamError(Exception):
    """A stream ended without its stop reason (the connection closed early)."""


def unterminated(what: str) -> str:
    """The problem of a stream the server *finished* (the SDK's iteration ended: its last
    chunk came, a cut connection raises instead) without a stop reason or an error frame:
    Letta's streams end with one of them, which is what tells a client whether to retry."""
    return f"{what}: the stream ended without a stop reason or an error frame"


def _kind(content: str) -> str:
    """A user message's kind, as the direct link reports it: the loop's hidden turns are JSON
    objects with a ``type``."""
    if not content.startswith("{"):
        return "input"
    try:
        value = json.loads(content)
    except ValueError:
        return "input"
    kind = value.get("type") if isinstance(value, dict) else None
    return HIDDEN.get(kind, "input") if isinstance(kind, str) else "input"


def _text(m: Any) -> str:
    kind = m.message_type
    if kind == "reasoning_message":
        return str(m.reasoning or "")
    if kind == "tool_call_message":
        return str(m.tool_call.arguments or "") if m.tool_call is not None else ""
    if kind == "tool_return_message":
        return str(m.tool_return or "")
    content = m.content
    if isinstance(content, list):  # text parts
        return "".join(getattr(part, "text", "") or "" for part in content)
    return str(content or "")


CALL_TYPES = ("tool_call_message", "approval_request_message")


def to_msg(m: Any, seq: int) -> Msg:
    kind = m.message_type
    tool = call_id = None
    if kind in CALL_TYPES and getattr(m, "tool_call", None) is not None:
        tool, call_id = m.tool_call.name, m.tool_call.tool_call_id
    elif kind == "tool_return_message":
        tool, call_id = m.name, m.tool_call_id
    text = _text(m)
    return Msg(
        id=m.id,
        seq=seq,
        run_id=m.run_id,
        type=kind,
        text=text,
        otid=m.otid,
        kind=_kind(text) if kind == "user_message" else "",
        tool=tool,
        status=m.status if kind == "tool_return_message" else None,
        step_id=getattr(m, "step_id", None),
        call_id=call_id,
    )


class HttpLink:
    def __init__(self, http: httpx.AsyncClient, background: BackgroundRuns | None = None) -> None:
        self.http = http
        self.background = background if background is not None else BackgroundRuns(0.0)
        self.ids: dict[str, str] = {}  # the workload's agent id -> the server's
        self._clients: dict[str, AsyncLetta] = {}
        self.unterminated: list[str] = []  # streams finished without a stop reason or error
        self.echoed: list[str] = []  # JSON answers whose messages hold a user message

    def _client(self, node: str) -> AsyncLetta:
        client = self._clients.get(node)
        if client is None:
            client = AsyncLetta(
                base_url=f"http://{node}:{PORT}", http_client=self.http, max_retries=0
            )
            self._clients[node] = client
        return client

    def sdk(self, node: str) -> AsyncLetta:
        """The SDK client talking to ``node`` (for reads beyond the Link protocol)."""
        return self._client(node)

    def retryable(self, error: BaseException) -> bool:
        if isinstance(error, letta_client.APIStatusError):
            if error.status_code in RETRY_STATUS:
                return True
            body = error.body  # an `event: error` frame mid-stream carries its own status
            return isinstance(body, dict) and body.get("status_code") in RETRY_STATUS
        return isinstance(
            error,
            letta_client.APIConnectionError
            | httpx.TransportError
            | IncompleteStreamError
            | IncompleteFollowError,
        )

    def _id(self, plan: AgentPlan) -> str:
        return self.ids[plan.agent_id]

    def server_id(self, plan: AgentPlan) -> str | None:
        return self.ids.get(plan.agent_id)

    async def create(self, node: str, plan: AgentPlan, block_limit: int, retry: bool) -> None:
        client = self._client(node)
        name = f"agent-{plan.number}"
        if retry:  # the first attempt may have created it
            page = await client.agents.list(name=name, order="asc", limit=1)
            if page.items:
                self.ids[plan.agent_id] = page.items[0].id
                return
        agent = await client.agents.create(
            name=name,
            agent_type=plan.agent_type,  # type: ignore[arg-type]
            memory_blocks=[
                {"label": b.label, "value": b.value, "limit": b.limit, "read_only": b.read_only}
                for b in plan.blocks
            ],
            tool_ids=list(plan.tool_ids),
            include_base_tools=False,
            **_options(plan),
        )
        self.ids[plan.agent_id] = agent.id

    async def send(
        self, node: str, plan: AgentPlan, message: Planned, otid: str | None, max_steps: int
    ) -> Sent:
        client = self._client(node)
        body: Any = {"role": "user", "content": message.text}
        if otid is not None:
            body["otid"] = otid
        steps: Any = max_steps if max_steps else letta_client.omit  # 0: not sent (Letta's 50)
        if not message.stream and self.background.chosen(otid):
            return await self.background.send(client, self._id(plan), body, steps, _text)
        if not message.stream:
            reply = await client.agents.messages.create(
                self._id(plan), messages=[body], max_steps=steps
            )
            echoed = [m.id for m in reply.messages if m.message_type == "user_message"]
            if echoed:  # LettaResponse.messages is the agent's: the input is not echoed
                self.echoed.append(
                    f"a{plan.number} #{message.index}: the answer holds user messages {echoed}"
                )
            runs = [m.run_id for m in reply.messages if m.run_id]
            replied = tuple(m.id for m in reply.messages)
            texts = [_text(m) for m in reply.messages if m.message_type == "assistant_message"]
            return Sent(
                runs[0] if runs else "",
                replied,
                reply.stop_reason.stop_reason,
                reply=texts[-1] if texts else None,
                steps=reply.usage.step_count if reply.usage is not None else None,
            )
        stream: Any = await client.agents.messages.create(
            self._id(plan),
            messages=[body],
            max_steps=steps,
            streaming=True,
            stream_tokens=True,
        )
        pieces: list[tuple[str, str]] = []
        returns: list[str] = []  # tool returns: each is streamed after its commit
        last = ""
        run_id, stop, events, steps = "", None, 0, None
        chunk: Any
        async for chunk in stream:
            events += 1
            kind = chunk.message_type
            if kind == "stop_reason":
                stop = chunk.stop_reason
            elif kind == "usage_statistics":
                steps = chunk.step_count
            elif kind not in ("usage_statistics", "ping"):
                last = chunk.id
                if kind == "tool_return_message":
                    returns.append(chunk.id)
                run_id = run_id or chunk.run_id or ""
                if kind in ("assistant_message", "reasoning_message", "tool_call_message"):
                    pieces.append((f"{chunk.id}/{kind}", _text(chunk)))
        if stop is None:
            self.unterminated.append(unterminated(f"a{plan.number} #{message.index}"))
            raise IncompleteStreamError("the stream ended before its stop reason")
        # Token deltas go out before their step commits; a model call that is cut and retried
        # leaves deltas under an id that is never stored. What the client can hold the server
        # to: every tool return, and, when the turn ended normally, its last message.
        ids = [*returns, last] if stop == "end_turn" and last and last not in returns else returns
        joined = join_pieces(pieces)
        texts = [text for key, text in joined if key.endswith("/assistant_message")]
        return Sent(
            run_id,
            tuple(ids),
            str(stop),
            joined,
            events,
            reply=texts[-1] if texts else None,
            steps=steps,
        )

    async def history(
        self, node: str, plan: AgentPlan, after: str | None, assistant: bool, limit: int
    ) -> list[Msg]:
        page = await self._client(node).agents.messages.list(
            self._id(plan),
            after=after,
            limit=limit,
            order="asc",
            use_assistant_message=assistant,
        )
        return [to_msg(m, i) for i, m in enumerate(page.items)]

    async def blocks(self, node: str, plan: AgentPlan) -> list[BlockState]:
        page = await self._client(node).agents.blocks.list(self._id(plan))
        return [BlockState(plan.agent_id, b.label or "", b.value, b.limit or 0) for b in page.items]

    async def passages(
        self, node: str, plan: AgentPlan, after: str | None, limit: int
    ) -> list[Any]:
        got = await self._client(node).agents.passages.list(
            self._id(plan), after=after, limit=limit, ascending=True
        )
        return list(got)


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context, made once per process: loading the CA bundle cost more than
    a tenth of a seed, and the simulated servers speak plain HTTP anyway."""
    return httpx.create_ssl_context()


@asynccontextmanager
async def open_http_link(
    timeout: float, background: BackgroundRuns | None = None, api_key: str | None = None
) -> AsyncIterator[HttpLink]:
    """One connection pool for every client task; closed when the clients are done. Its
    cookie store parses only responses that set a cookie (``kelpie_dst/net/_cookies.py``).
    ``api_key``: every request carries ``Authorization: Bearer <api_key>``."""
    from kelpie_dst.net._cookies import quiet_cookies

    headers = {"authorization": f"Bearer {api_key}"} if api_key else None
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout), verify=_tls(), headers=headers
    ) as http:
        yield HttpLink(quiet_cookies(http), background)


def _tool_rules(plan: AgentPlan) -> dict[str, Any]:
    """The plan's ``max_count_per_step`` rules as the SDK's ``tool_rules`` (none: omitted)."""
    if not plan.max_counts:
        return {}
    rules = [
        {"tool_name": name, "type": "max_count_per_step", "max_count_limit": limit}
        for name, limit in plan.max_counts
    ]
    return {"tool_rules": rules}


def _options(plan: AgentPlan) -> dict[str, Any]:
    """The plan's tool rules and tags (each omitted when it has none, so a plan without them
    sends the request it always did). Kept on one line of ``create``: the guards record the
    line of each SDK call in the trace, and moving one would change every HTTP seed's hash."""
    zone = {"timezone": plan.timezone} if plan.timezone else {}
    return {**_tool_rules(plan), **({"tags": list(plan.tags)} if plan.tags else {}), **zone}
