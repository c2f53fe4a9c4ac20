"""One HTTP/1.1 connection: h11 over a trio stream, keep-alive, limits, timeouts.

The loop reads a request head (with the keep-alive or header timeout), runs the ASGI app for it
through a :class:`~._asgi.RequestCycle`, and starts the next cycle if both sides allow it. Only
one task reads the socket at a time: the app's ``receive()`` while the request body arrives and,
once it has, while it waits for a disconnect (anything the client pipelines meanwhile is kept
in h11's buffer for the next cycle). Errors the server answers itself are JSON
``{"detail": ...}`` and close the connection.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import h11
import trio

from ._asgi import (
    ASGIApp,
    RequestCycle,
    RequestRejected,
    http_scope,
    reason,
    split_target,
)
from ._errors import ClientDisconnected
from ._log import AccessRecord, ServerLogger
from ._options import ServerOptions

__all__ = ["HttpConnection", "ServerHost"]

_DRAIN_LIMIT = 64 * 1024  # unread request body the server reads past to keep a connection
_LINGER_LIMIT = 1024 * 1024  # bytes discarded while lingering before a close
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, ClientDisconnected, OSError)


class ServerHost(Protocol):
    """What a connection needs from its server."""

    app: ASGIApp
    options: ServerOptions
    logger: ServerLogger
    closing: bool

    def lifespan_state(self) -> dict[str, Any]: ...

    def access(self, record: AccessRecord) -> None: ...


def _short(error: h11.ProtocolError) -> str:
    """h11's message without the offending bytes it quotes (one line, no echo of input)."""
    return str(error).split(":", 1)[0].strip()[:100] or type(error).__name__


def _address(value: object) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return (str(value[0]), int(value[1]))
    return None


def _head_size(request: h11.Request) -> int:
    """The size of the request line and headers as sent (give or take whitespace)."""
    line = len(request.method) + len(request.target) + 12
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers) + 2


class HttpConnection:
    """Serves requests on one stream until either side closes or a timeout fires."""

    def __init__(self, host: ServerHost, stream: trio.abc.Stream) -> None:
        self.host = host
        self.stream = stream
        self.options = host.options
        self.h11 = h11.Connection(
            h11.SERVER, max_incomplete_event_size=host.options.max_header_bytes
        )
        self.client: tuple[str, int] | None = None
        self.server: tuple[str, int] | None = None
        sock = getattr(stream, "socket", None)
        if sock is not None:
            try:
                self.client = _address(sock.getpeername())
                self.server = _address(sock.getsockname())
            except OSError:
                pass
        self.idle_scope: trio.CancelScope | None = None  # set while waiting for a new request
        self.requests = 0
        self._eof = False  # the client closed its side
        self._linger = False  # close gently: the client may still be sending
        self._body_withheld = False  # the client waits for a 100 that was not sent (yet)
        self._write_lock = trio.StrictFIFOLock()

    @property
    def client_label(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "-"

    def close_if_idle(self) -> None:
        if self.idle_scope is not None:
            self.idle_scope.cancel()

    async def run(self) -> None:
        try:
            first = True
            while True:
                request = await self._read_request(first)
                first = False
                if request is None or not await self._respond(request):
                    return
                self.h11.start_next_cycle()
        except _GONE:
            pass  # the client went away or the network broke the connection
        finally:
            await self._close()

    # -- reading a request head ------------------------------------------------------------------
    async def _read_request(self, first: bool) -> h11.Request | None:
        options = self.options
        partial = bool(self.h11.trailing_data[0])  # the start of a pipelined request
        timeout = options.header_timeout if first or partial else options.keep_alive_timeout
        deadline = trio.current_time() + timeout
        started = trio.current_time()
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as error:
                if not self._eof:
                    status = error.error_status_hint
                    await self._reject(status, f"{reason(status).decode()}: {_short(error)}")
                    self._access_unparsed(status, started)
                return None
            if isinstance(event, h11.Request):
                return event
            if event is not h11.NEED_DATA:
                return None  # ConnectionClosed (or nothing a client may send while idle)
            if not partial and self.host.closing:
                return None
            data = await self._receive_by(deadline, idle=not partial)
            if data is None:
                if partial:
                    await self._reject(
                        408, f"Request Timeout: the request head took over {timeout}s"
                    )
                    self._access_unparsed(408, started)
                return None
            if data and not partial:
                partial = True
                started = trio.current_time()
                deadline = started + options.header_timeout
                timeout = options.header_timeout
            self._feed(data)

    async def _receive_by(self, deadline: float, *, idle: bool) -> bytes | None:
        """Bytes from the client (``b""`` at EOF), or ``None`` at the deadline or, when
        ``idle``, when the server closes idle connections."""
        with trio.move_on_at(deadline) as scope:
            if idle:
                self.idle_scope = scope
            try:
                return bytes(await self.stream.receive_some(self.options.receive_bytes))
            finally:
                self.idle_scope = None
        return None

    def _feed(self, data: bytes) -> None:
        if not data:
            self._eof = True
        self.h11.receive_data(data)

    # -- one request -----------------------------------------------------------------------------
    async def _respond(self, request: h11.Request) -> bool:
        """Run the app for ``request``; whether the connection may serve another one."""
        self.requests += 1
        started = trio.current_time()
        # a client that sent "expect: 100-continue" sends the body only after a 100
        self._body_withheld = self.h11.they_are_waiting_for_100_continue
        cycle: RequestCycle | None = None
        status = 0
        try:
            if request.http_version not in (b"1.0", b"1.1"):
                version = request.http_version.decode("ascii", "replace")
                status = await self._reject(505, f"HTTP Version Not Supported: {version}", request)
                return False
            if _head_size(request) > self.options.max_header_bytes:
                # h11 bounds only heads that arrive in pieces; one read can hold a whole one
                limit = self.options.max_header_bytes
                detail = f"Request Header Fields Too Large: the limit is {limit} bytes"
                status = await self._reject(431, detail, request)
                return False
            target = split_target(request.method, request.target)
            if target is None:
                status = await self._reject(400, "Bad Request: invalid request target", request)
                return False
            length = self._content_length(request)
            if length is not None and length > self.options.max_body_bytes:
                detail = f"Request body too large: the limit is {self.options.max_body_bytes} bytes"
                status = await self._reject(413, detail, request)
                return False
            cycle = RequestCycle(
                self,
                method=request.method,
                max_body=self.options.max_body_bytes,
                close=lambda: self.host.closing,
            )
            keep, status = await self._run_app(request, target, cycle)
            return keep and not self.host.closing
        finally:
            self.host.access(
                AccessRecord(
                    client=self.client_label,
                    method=request.method.decode("ascii", "replace"),
                    target=request.target.decode("ascii", "replace"),
                    http_version=request.http_version.decode("ascii", "replace"),
                    status=status,
                    bytes_sent=cycle.bytes_sent if cycle is not None else 0,
                    duration=trio.current_time() - started,
                )
            )

    async def _run_app(
        self, request: h11.Request, target: tuple[bytes, bytes], cycle: RequestCycle
    ) -> tuple[bool, int]:
        """Run the app; (whether the connection may go on, the status the client got)."""
        scope = http_scope(
            request,
            *target,
            client=self.client,
            server=self.server,
            root_path=self.options.root_path,
            state=self.host.lifespan_state(),
        )
        failure: Exception | None = None
        try:
            await self.host.app(scope, cycle.receive, cycle.send)
        except Exception as exc:
            failure = exc
        where = f"{request.method.decode('ascii', 'replace')} {scope['path']}"
        gone = cycle.disconnected or cycle.rejection is not None
        if failure is not None:
            if gone:
                self.host.logger.debug("ASGI app raised after the client went away (%s)", where)
            else:
                self.host.logger.error(
                    "Exception in ASGI application (%s)", where, exc_info=failure
                )
        elif not cycle.response_complete and not gone:
            self.host.logger.error(
                "ASGI app returned without %s the response (%s)",
                "finishing" if cycle.response_started else "starting",
                where,
            )
        if cycle.headers_sent:
            keep = (
                cycle.response_complete
                and not cycle.disconnected
                and await self._drain_body()
                and self.h11.our_state is h11.DONE
                and self.h11.their_state is h11.DONE
            )
            return keep, cycle.status
        if cycle.rejection is not None:
            rejection = cycle.rejection
            return False, await self._reject(rejection.status, rejection.detail, request)
        if not cycle.disconnected:
            return False, await self._reject(500, "Internal Server Error", request)
        return False, 0

    @staticmethod
    def _content_length(request: h11.Request) -> int | None:
        for name, value in request.headers:
            if name == b"content-length":
                return int(value)  # h11 has validated it
        return None

    async def _drain_body(self) -> bool:
        """Read past a request body the app left unread, if it is small; whether it ended.

        A client that sent ``Expect: 100-continue`` sends its body only after a ``100
        Continue``: if the app answered without asking for the body (no 100 went out), the
        body never comes and the connection closes; once a 100 went out (the app started to
        read), the body is on its way and is drained like any other, keeping the connection."""
        if self.h11.their_state is h11.DONE:
            return True
        if self.h11.their_state is not h11.SEND_BODY or self._body_withheld:
            self._linger = self.h11.their_state is h11.SEND_BODY
            return False
        drained = 0
        deadline = trio.current_time() + self.options.body_timeout
        while drained <= _DRAIN_LIMIT:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError:
                return False
            if isinstance(event, h11.EndOfMessage):
                return True
            if isinstance(event, h11.Data):
                drained += len(event.data)
            elif event is h11.NEED_DATA:
                data = await self._receive_by(deadline, idle=False)
                if data is None:
                    break
                self._feed(data)
            else:
                return False
        self._linger = True
        return False

    # -- Wire (for RequestCycle) -----------------------------------------------------------------
    async def next_body_event(self) -> h11.Data | h11.EndOfMessage:
        timeout = self.options.body_timeout
        while True:
            event = self.buffered_body_event()
            if event is not None:
                return event
            if self.h11.they_are_waiting_for_100_continue:
                await self.write(
                    self.encode(h11.InformationalResponse(status_code=100, headers=[]))
                )
                self._body_withheld = False  # the body is on its way now
            data = await self._receive_by(trio.current_time() + timeout, idle=False)
            if data is None:
                raise RequestRejected(408, f"Request Timeout: no request body data for {timeout}s")
            self._feed(data)

    def buffered_body_event(self) -> h11.Data | h11.EndOfMessage | None:
        try:
            event = self.h11.next_event()
        except h11.RemoteProtocolError as error:
            if self._eof:
                raise ClientDisconnected("the client closed the connection mid-body") from None
            raise RequestRejected(400, f"Bad Request: {_short(error)}") from None
        if isinstance(event, h11.Data | h11.EndOfMessage):
            return event
        if event is h11.NEED_DATA:
            return None
        raise RequestRejected(400, f"Bad Request: unexpected {type(event).__name__} in the body")

    async def wait_disconnect(self) -> None:
        buffered = 0
        while not self._eof:
            if buffered > self.options.max_header_bytes:
                await trio.sleep_forever()  # enough pipelined; read the rest after this response
            try:
                data = bytes(await self.stream.receive_some(self.options.receive_bytes))
            except _GONE:
                return
            buffered += len(data)
            self._feed(data)

    def encode(self, event: h11.Event) -> bytes:
        return self.h11.send(event) or b""

    async def write(self, data: bytes) -> None:
        if not data:
            return
        async with self._write_lock:
            with trio.move_on_after(self.options.write_timeout) as scope:
                try:
                    await self.stream.send_all(data)
                except _GONE as error:
                    raise ClientDisconnected(f"the client is gone: {error}") from None
            if scope.cancelled_caught:
                raise ClientDisconnected(
                    f"the client read nothing for {self.options.write_timeout}s"
                )

    # -- answers from the server itself ----------------------------------------------------------
    async def _reject(self, status: int, detail: str, request: h11.Request | None = None) -> int:
        """Send ``status`` with ``{"detail": detail}`` and ``connection: close``; the caller
        then ends the connection. Returns ``status``."""
        body = json.dumps({"detail": detail}).encode()
        head = (
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % (status, reason(status), len(body))
        )
        data = head if request is not None and request.method == b"HEAD" else head + body
        self._linger = not self._eof
        try:
            await self.write(data)
        except ClientDisconnected:
            pass
        return status

    def _access_unparsed(self, status: int, started: float) -> None:
        self.host.access(
            AccessRecord(
                self.client_label, "-", "-", "1.1", status, 0, trio.current_time() - started
            )
        )

    async def _close(self) -> None:
        try:
            if self._linger and not self._eof:
                with trio.move_on_after(self.options.linger_timeout):
                    if isinstance(self.stream, trio.abc.HalfCloseableStream):
                        await self.stream.send_eof()
                    discarded = 0
                    while discarded < _LINGER_LIMIT:
                        data = await self.stream.receive_some(self.options.receive_bytes)
                        if not data:
                            break
                        discarded += len(data)
        except _GONE:
            pass
        finally:
            await trio.aclose_forcefully(self.stream)
