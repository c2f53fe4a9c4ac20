"""The ASGI 3 bridge: the http scope, one request's ``receive``/``send``, and lifespan.

:class:`RequestCycle` turns one h11 request into ASGI messages and back. It talks to the
connection through the small :class:`Wire` protocol (``_connection.py`` implements it), so the
ASGI rules live here and the socket handling lives there.
"""

from __future__ import annotations

import http
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol
from urllib.parse import unquote

import h11
import trio

from ._errors import AsgiProtocolError, ClientDisconnected, LifespanError
from ._log import ServerLogger

__all__ = [
    "ASGIApp",
    "Lifespan",
    "Message",
    "RequestCycle",
    "RequestRejected",
    "Scope",
    "Wire",
    "http_scope",
    "reason",
    "split_target",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# 2.3, not 2.4: Starlette then watches receive() for http.disconnect while it streams, so a
# StreamingResponse stops as soon as the client goes away; send() still raises an OSError
# (ClientDisconnected) on a closed connection, as 2.4 asks.
ASGI_VERSION = {"version": "3.0", "spec_version": "2.3"}
_DISCONNECT: Message = {"type": "http.disconnect"}


class RequestRejected(Exception):
    """The server (not the app) answers this request: ``status`` with ``{"detail": detail}``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Wire(Protocol):
    """What a :class:`RequestCycle` needs from its connection."""

    async def next_body_event(self) -> h11.Data | h11.EndOfMessage:
        """The next piece of the request body; raises RequestRejected or ClientDisconnected."""

    def buffered_body_event(self) -> h11.Data | h11.EndOfMessage | None:
        """The next piece if it has already arrived, else ``None`` (never waits)."""

    async def wait_disconnect(self) -> None:
        """Return once the client has gone away (buffering anything it pipelines)."""

    def encode(self, event: h11.Event) -> bytes:
        """h11's bytes for ``event`` (raises ``h11.LocalProtocolError``)."""

    async def write(self, data: bytes) -> None:
        """Send bytes; raises ClientDisconnected."""


def reason(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def split_target(method: bytes, target: bytes) -> tuple[bytes, bytes] | None:
    """``(raw_path, query_string)`` of a request target, or ``None`` if it is not one we serve.

    Origin form (``/a/b?x=1``), absolute form (``http://host/a?x=1``, as proxies send) and
    ``*`` for OPTIONS. Targets must be ASCII (RFC 3986); h11 already refused spaces and controls.
    """
    if not target.isascii():
        return None
    if target == b"*":
        return (b"*", b"") if method == b"OPTIONS" else None
    lowered = target[:8].lower()
    if lowered.startswith((b"http://", b"https://")):
        rest = target.split(b"://", 1)[1]
        slash = rest.find(b"/")
        query = rest.find(b"?")
        if slash < 0 or 0 <= query < slash:
            target = b"/" + (rest[query:] if query >= 0 else b"")
        else:
            target = rest[slash:]
    if not target.startswith(b"/"):
        return None
    raw_path, _, query_string = target.partition(b"?")
    return raw_path, query_string


def http_scope(
    request: h11.Request,
    raw_path: bytes,
    query_string: bytes,
    *,
    client: tuple[str, int] | None,
    server: tuple[str, int] | None,
    root_path: str,
    state: dict[str, Any],
) -> Scope:
    return {
        "type": "http",
        "asgi": dict(ASGI_VERSION),
        "http_version": request.http_version.decode("ascii"),
        "method": request.method.decode("ascii"),
        "scheme": "http",
        "path": unquote(raw_path.decode("ascii")),
        "raw_path": raw_path,
        "query_string": query_string,
        "root_path": root_path,
        "headers": [(name, value) for name, value in request.headers],
        "client": client,
        "server": server,
        "state": dict(state),  # a shallow copy of the lifespan state, as the spec asks
    }


class RequestCycle:
    """``receive`` and ``send`` for one request (ASGI http, spec 2.3 plus OSError on send)."""

    def __init__(
        self, wire: Wire, *, method: bytes, max_body: int, close: Callable[[], bool]
    ) -> None:
        self.wire = wire
        self.head = method == b"HEAD"
        self.max_body = max_body
        self._close = close  # whether to add "connection: close" (the server is stopping)
        self.body_received = 0
        self.body_complete = False
        self.response_started = False  # the app sent http.response.start
        self._discarding = False  # it did after http.disconnect: its answer goes nowhere
        self.headers_sent = False  # the response head went out on the wire
        self.response_complete = False
        self.disconnected = False
        self.rejection: RequestRejected | None = None
        self.status = 0
        self.bytes_sent = 0
        self._pending: h11.Data | h11.EndOfMessage | None = None
        self._start: h11.Response | None = None
        self._receive_lock = trio.Lock()
        self._send_lock = trio.Lock()
        self._watch: trio.CancelScope | None = None

    # -- receive ------------------------------------------------------------------------------
    async def receive(self) -> Message:
        async with self._receive_lock:
            if self.disconnected or self.rejection is not None or self.response_complete:
                return dict(_DISCONNECT)
            if not self.body_complete:
                return await self._read_body()
            with trio.CancelScope() as self._watch:
                await self.wire.wait_disconnect()
                self.disconnected = True
            self._watch = None
            return dict(_DISCONNECT)

    async def _read_body(self) -> Message:
        try:
            event = (
                self._pending if self._pending is not None else await self.wire.next_body_event()
            )
            self._pending = None
            if isinstance(event, h11.EndOfMessage):
                self.body_complete = True
                return {"type": "http.request", "body": b"", "more_body": False}
            data = bytes(event.data)
            self.body_received += len(data)
            if self.body_received > self.max_body:
                raise RequestRejected(
                    413, f"Request body too large: the limit is {self.max_body} bytes"
                )
            following = self.wire.buffered_body_event()
        except RequestRejected as rejected:
            self.rejection = rejected
            return dict(_DISCONNECT)
        except ClientDisconnected:
            self.disconnected = True
            return dict(_DISCONNECT)
        if isinstance(following, h11.EndOfMessage):
            self.body_complete = True
        else:
            self._pending = following
        return {"type": "http.request", "body": data, "more_body": not self.body_complete}

    # -- send ---------------------------------------------------------------------------------
    async def send(self, message: Message) -> None:
        async with self._send_lock:
            kind = message.get("type") if isinstance(message, MutableMapping) else None
            if kind == "http.response.start":
                self._response_start(message)
            elif kind == "http.response.body":
                await self._response_body(message)
            else:
                raise AsgiProtocolError(
                    f"unexpected ASGI message {kind!r} on an http connection "
                    "(expected http.response.start or http.response.body)"
                )

    def _response_start(self, message: Message) -> None:
        if self.response_started:
            raise AsgiProtocolError("http.response.start was sent twice")
        if self.disconnected or self.rejection is not None:
            # The app was told (http.disconnect) and answers anyway, typically with an error
            # for the body it could not read: drop that answer quietly. The server answers a
            # rejected request itself (413, 408...); a gone client gets nothing.
            self.response_started = self._discarding = True
            return
        status = message.get("status")
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise AsgiProtocolError(
                f"http.response.start status must be an int in 200..599, got {status!r}"
            )
        headers = list(message.get("headers", ()))
        if self._close():
            headers.append((b"connection", b"close"))
        try:
            self._start = h11.Response(status_code=status, headers=headers, reason=reason(status))
        except (h11.LocalProtocolError, TypeError, ValueError) as error:
            raise AsgiProtocolError(f"http.response.start headers rejected: {error}") from None
        self.response_started = True
        self.status = status

    async def _response_body(self, message: Message) -> None:
        if not self.response_started:
            raise AsgiProtocolError("http.response.body before http.response.start")
        if self.response_complete:
            raise AsgiProtocolError("http.response.body after the response ended")
        if self._discarding and not message.get("more_body", False):
            self.response_complete = True  # the end of a dropped answer
            return
        if self.disconnected or self._discarding:
            raise ClientDisconnected("the client is gone")  # stop producing
        body = message.get("body", b"")
        if not isinstance(body, bytes | bytearray | memoryview):
            raise AsgiProtocolError(f"http.response.body body must be bytes, got {type(body)}")
        more = bool(message.get("more_body", False))
        try:
            data = b""
            if self._start is not None:
                data += self.wire.encode(self._start)
            if body and not self.head:
                data += self.wire.encode(h11.Data(data=bytes(body)))
            if not more:
                data += self.wire.encode(h11.EndOfMessage())
        except h11.LocalProtocolError as error:
            raise AsgiProtocolError(f"the response does not fit its framing: {error}") from None
        try:
            await self.wire.write(data)
        except ClientDisconnected:
            self.disconnected = True
            raise
        self._start = None
        self.headers_sent = True
        if not self.head:
            self.bytes_sent += len(body)
        if not more:
            self.response_complete = True
            if self._watch is not None:
                self._watch.cancel()  # a receive() waiting for disconnect returns now


class Lifespan:
    """The ASGI lifespan protocol: startup before serving, shutdown after the last request."""

    def __init__(self, app: ASGIApp, mode: str, timeout: float, logger: ServerLogger) -> None:
        self.app = app
        self.mode = mode
        self.timeout = timeout
        self.logger = logger
        self.state: dict[str, Any] = {}
        self.running = False
        self._to_app, self._app_inbox = trio.open_memory_channel[Message](math.inf)
        self._from_app, self._replies = trio.open_memory_channel[Message](math.inf)
        self._scope = trio.CancelScope()

    async def startup(self, nursery: trio.Nursery) -> LifespanError | None:
        """Run the startup phase; the error that must stop the server, if any."""
        if self.mode == "off":
            return None
        nursery.start_soon(self._main)
        reply = await self._exchange("startup")
        kind = reply["type"]
        if kind == "lifespan.startup.complete":
            self.running = True
            return None
        self._scope.cancel()
        if kind == "lifespan.startup.failed":
            message = str(reply.get("message", "")).strip()
            self.logger.error("ASGI lifespan startup failed: %s", message or "(no message)")
            last = message.splitlines()[-1] if message else "no message"
            return LifespanError(f"the application's lifespan startup failed: {last}")
        if kind == "timeout":
            return LifespanError(f"the application's lifespan startup took over {self.timeout}s")
        error = reply.get("error")
        if self.mode == "on":
            return LifespanError(
                f"the application does not support the lifespan protocol: {error!r}"
            )
        self.logger.debug("ASGI lifespan not supported (%r); serving without it", error)
        return None

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        reply = await self._exchange("shutdown")
        if reply["type"] == "lifespan.shutdown.failed":
            self.logger.error("ASGI lifespan shutdown failed: %s", reply.get("message", ""))
        elif reply["type"] != "lifespan.shutdown.complete":
            self.logger.error("ASGI lifespan shutdown did not complete: %s", reply)
        with trio.move_on_after(self.timeout):
            while reply["type"] != "exited":
                reply = await self._replies.receive()
        self._scope.cancel()

    async def _exchange(self, phase: str) -> Message:
        self._to_app.send_nowait({"type": f"lifespan.{phase}"})
        with trio.move_on_after(self.timeout):
            return await self._replies.receive()
        return {"type": "timeout"}

    async def _main(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}}
        scope["state"] = self.state
        error: BaseException | None = None
        with self._scope:
            try:
                await self.app(scope, self._app_inbox.receive, self._send)
            except Exception as exc:
                error = exc
                if self.running:
                    self.logger.error("ASGI lifespan task raised", exc_info=exc)
        self._from_app.send_nowait({"type": "exited", "error": error})

    async def _send(self, message: Message) -> None:
        kind = message.get("type")
        if kind not in (
            "lifespan.startup.complete",
            "lifespan.startup.failed",
            "lifespan.shutdown.complete",
            "lifespan.shutdown.failed",
        ):
            raise AsgiProtocolError(f"unexpected ASGI lifespan message {kind!r}")
        await trio.lowlevel.checkpoint()
        self._from_app.send_nowait(dict(message))
