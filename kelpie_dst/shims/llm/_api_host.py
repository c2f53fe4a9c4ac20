"""A simulated Anthropic API host: ``POST /v1/messages`` (JSON and SSE) on a simulated node.

``await start_anthropic_host(sim, policy)`` adds the node ``api.anthropic.com`` and serves
HTTP/1.1 on port 80 with h11 over trio sockets, so the real ``anthropic`` SDK (through
``AnthropicLlm(base_url="http://api.anthropic.com", api_key="sim")``) runs unmodified against
it, over the simulated network and its faults. Answers come from the same engine as
``SimLlmClient``; the ``llm.*`` faults are decided for the host's node and show up on the
wire: error statuses with Anthropic's error bodies and headers, broken tool JSON, and SSE
streams that stop without their terminating chunk.

Routes: ``POST /v1/messages``, ``POST /v1/messages/count_tokens``. Requests need an API key
(``x-api-key`` or ``authorization``) and an ``anthropic-version`` header, like the real API.
"""

from __future__ import annotations

import http
import json
from collections import Counter
from typing import Any

import attrs
import h11
import trio

from ..._nodes import Node
from ..._sim import Simulation
from ._engine import LlmObserver, LlmTiming, SimLlmEngine, StreamShape, count_tokens
from ._faults import Failure
from ._turns import Policy
from ._wire import SseEncoder, WireError, error_json, message_json, parse_request, sse_event

__all__ = ["AnthropicApiHost", "start_anthropic_host"]

try:
    # The anthropic SDK imports OpenTelemetry's propagators on its first request, and their
    # import calls uuid4 (a guarded call, so a traced event). Import them now, outside any
    # run, so a run's trace does not depend on whether an earlier run in this process did.
    import opentelemetry.propagate  # noqa: F401
except ImportError:  # pragma: no cover - the SDK requires opentelemetry-api today
    pass

MAX_BODY = 32 * 1024 * 1024
_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError)


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:  # 529, Anthropic's own
        return "Overloaded"


class _Cut(Exception):
    """The stream is to break off here (llm.stream_cut)."""


class AnthropicApiHost:
    """The HTTP side of a simulated API host. ``statuses`` counts the answers by status."""

    def __init__(
        self,
        sim: Simulation,
        policy: Policy,
        *,
        name: str = "api.anthropic.com",
        port: int = 80,
        timing: LlmTiming | None = None,
        observer: LlmObserver | None = None,
        shape: StreamShape | None = None,
        gateway_errors: float = 0.0,
    ) -> None:
        if not 0.0 <= gateway_errors <= 1.0:
            raise ValueError(f"gateway_errors must be in [0, 1], got {gateway_errors!r}")
        self.sim = sim
        # The share of failure answers (429, 5xx, 529...) a gateway in front of the API gives
        # instead: the same status and headers, but a body that is not Anthropic's error JSON
        # (plain text), as load balancers and proxies answer. The draw uses its own stream,
        # and only when the share is non-zero, so other runs' traces do not move.
        self.gateway_errors = gateway_errors
        self.name = name
        self.port = port
        self.engine = SimLlmEngine(policy, timing, observer=observer, shape=shape)
        self.statuses: Counter[int] = Counter()
        self.node: Node | None = None
        self._ready = trio.Event()

    @property
    def base_url(self) -> str:
        return f"http://{self.name}" + ("" if self.port == 80 else f":{self.port}")

    async def main(self, node: Node) -> None:
        """The node's program: serve until the node crashes (a restart serves again)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_tcp, self._connection, self.port)
            self._ready.set()

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                got = await self._read(conn, stream)
                if got is None:
                    return
                await self._handle(conn, stream, *got)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except _Cut:
            await stream.aclose()
        except _ERRORS:
            pass  # the client went away, or the network broke the connection

    async def _read(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> tuple[h11.Request, bytes | None] | None:
        """The next request and its body (``None`` if it is too large), or ``None`` at EOF."""
        request: h11.Request | None = None
        body: bytearray | None = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                if body is not None:
                    body += event.data
                    body = body if len(body) <= MAX_BODY else None
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body) if body is not None else None
            else:  # ConnectionClosed, PAUSED
                return None

    async def _handle(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        request: h11.Request,
        body: bytes | None,
    ) -> None:
        rid = self.engine.new_id(self.sim, "req_011", 21)
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        path = request.target.decode().split("?", 1)[0].rstrip("/")
        reply = _Reply(conn, stream, rid, self.statuses)
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return await reply.error(404, "not_found_error", f"Not found: {path}")
        if request.method != b"POST":
            return await reply.error(405, "invalid_request_error", "Method not allowed")
        if "x-api-key" not in headers and "authorization" not in headers:
            return await reply.error(401, "authentication_error", "x-api-key header is required")
        if "anthropic-version" not in headers:
            return await reply.error(
                400, "invalid_request_error", "anthropic-version: header is required"
            )
        if body is None:
            return await reply.error(413, "request_too_large", f"bodies are limited to {MAX_BODY}")
        try:
            data = json.loads(body)
            if path.endswith("count_tokens"):
                data = {**data, "max_tokens": 1} if isinstance(data, dict) else data
            llm_request, streaming = parse_request(data)
        except ValueError as error:  # JSONDecodeError and WireError both
            message = str(error) if isinstance(error, WireError) else "the body is not valid JSON"
            return await reply.error(400, "invalid_request_error", message)
        if path.endswith("count_tokens"):
            return await reply.json(200, {"input_tokens": count_tokens(llm_request)})
        node = self.sim.current_node()
        where = node.name if node is not None else self.name
        plan = self.engine.plan(llm_request, streaming=streaming, sim=self.sim, node=where)
        if isinstance(plan, Failure):
            await trio.sleep(plan.delay)
            extra = []
            if plan.retry_after is not None:
                extra.append(("retry-after", f"{plan.retry_after:g}"))
            if self.gateway_errors and self.sim.rng("llm/gateway").random() < self.gateway_errors:
                text = f"{plan.status} {_phrase(plan.status)}"
                return await reply.plain(plan.status, text, extra)
            return await reply.error(plan.status, plan.error_type, plan.message, extra)
        if not streaming:
            await trio.sleep(plan.duration)
            if plan.partial is not None:  # llm.answer_cut: as a buffering gateway answers
                cut = attrs.evolve(plan.response, content=plan.partial)
                return await reply.json(200, {**message_json(cut), "stop_reason": None})
            return await reply.json(200, message_json(plan.response))
        encoder = SseEncoder()
        for i, (delay, chunk) in enumerate(plan.steps):
            await trio.sleep(delay + (plan.stall if i == plan.stall_at else 0.0))
            if i == 0:
                await reply.start_stream(encoder.start(plan.response))
            if i == plan.cut_after:
                return await self._cut(reply, plan.cut_clean)
            await reply.send(encoder.chunk(chunk))
        if plan.reset_after_end:
            raise _Cut  # every event sent, message_stop too: the connection breaks before the end
        await reply.end()

    async def _cut(self, reply: _Reply, clean: float) -> None:
        """Break the stream off: the connection breaks mid-body, or (with probability
        ``clean``) the body ends properly without ``message_stop``, half the time after an SSE
        ``error`` event, as the real API reports an overload mid-stream."""
        rng = self.sim.rng("llm/wire")
        if not (clean and rng.random() < clean):
            raise _Cut
        if rng.random() < 0.5:
            body = error_json("overloaded_error", "Overloaded", reply.rid)
            await reply.send(sse_event("error", body))
        await reply.end()


class _Reply:
    """Writes one HTTP response on a connection."""

    def __init__(
        self, conn: h11.Connection, stream: trio.SocketStream, rid: str, statuses: Counter[int]
    ) -> None:
        self.conn, self.stream, self.rid, self.statuses = conn, stream, rid, statuses

    async def _head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.statuses[status] += 1
        headers = [*headers, ("request-id", self.rid)]
        await self.stream.send_all(
            self.conn.send(h11.Response(status_code=status, headers=headers))
        )

    async def json(
        self, status: int, body: Any, extra: list[tuple[str, str]] | None = None
    ) -> None:
        payload = json.dumps(body).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        await self._head(status, [*headers, *(extra or [])])
        await self.send(payload)
        await self.end()

    async def error(
        self, status: int, kind: str, message: str, extra: list[tuple[str, str]] | None = None
    ) -> None:
        await self.json(status, error_json(kind, message, self.rid), extra)

    async def plain(self, status: int, text: str, extra: list[tuple[str, str]]) -> None:
        """A gateway's answer: ``text`` as ``text/plain``, not Anthropic's error JSON."""
        payload = text.encode()
        headers = [("content-type", "text/plain"), ("content-length", str(len(payload)))]
        await self._head(status, [*headers, *extra])
        await self.send(payload)
        await self.end()

    async def start_stream(self, first: bytes) -> None:
        headers = [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
        ]
        await self._head(200, headers)
        await self.send(first)

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(self.conn.send(h11.Data(data=data)))

    async def end(self) -> None:
        await self.stream.send_all(self.conn.send(h11.EndOfMessage()))


async def start_anthropic_host(
    sim: Simulation,
    policy: Policy,
    *,
    name: str = "api.anthropic.com",
    port: int = 80,
    timing: LlmTiming | None = None,
    observer: LlmObserver | None = None,
    shape: StreamShape | None = None,
    gateway_errors: float = 0.0,
) -> AnthropicApiHost:
    """Add node ``name`` serving the Messages API from ``policy``; return once it listens.

    Point the SDK at ``host.base_url`` (``http://api.anthropic.com``) with any API key.
    ``observer`` sees every request as the host parsed it off the wire (what the model was
    shown), as with :class:`SimLlmClient`'s. ``gateway_errors`` is the share of failure
    answers given as a gateway gives them (a plain-text body, not Anthropic's error JSON).
    """
    host = AnthropicApiHost(
        sim,
        policy,
        name=name,
        port=port,
        timing=timing,
        observer=observer,
        shape=shape,
        gateway_errors=gateway_errors,
    )
    host.node = sim.add_node(name, host.main)
    await host._ready.wait()
    return host
