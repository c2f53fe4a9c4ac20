"""Small ASGI apps and recorders for the HTTP server tests (production and simulation).

* :func:`raw_app`: a hand-written ASGI app (no framework), so each ASGI rule is exercised
  directly: body chunks, disconnects, errors, missing responses, HEAD, 100-continue.
* :func:`fastapi_app`: a FastAPI app with JSON routes, an SSE stream that stops on
  ``http.disconnect``, a JSON exception handler and a lifespan, so the bridge is exercised
  with the real framework.

Both record what they observe in an :class:`AppLog` so tests can assert on the app's view.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

import h11

# FastAPI imports pydantic.v1 lazily when the first route is added. Inside a simulation the
# guards have swapped datetime.date for a subclass with its own metaclass, and pydantic.v1's
# `class ConstrainedDate(date, metaclass=...)` then fails with a metaclass conflict, so the
# module must be imported before any run (as with the anthropic SDK and mcp, D20/D22).
import pydantic.v1  # noqa: F401
import trio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from kelpie_agent.http import AccessRecord

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class AppLog:
    """What the apps and the server reported: app events, access records, log calls."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.access: list[AccessRecord] = []
        self.logs: list[tuple[str, str, BaseException | None]] = []
        self.disconnected = trio.Event()

    # ServerLogger (never reads the wall clock, unlike logging.Logger)
    def _log(self, level: str, msg: object, args: tuple[object, ...], exc_info: Any) -> None:
        text = str(msg) % args if args else str(msg)
        self.logs.append((level, text, exc_info if isinstance(exc_info, BaseException) else None))

    def error(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self._log("error", msg, args, exc_info)

    def warning(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self._log("warning", msg, args, exc_info)

    def info(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self._log("info", msg, args, exc_info)

    def debug(self, msg: object, *args: object, exc_info: Any = None) -> None:
        self._log("debug", msg, args, exc_info)

    def record_access(self, record: AccessRecord) -> None:
        self.access.append(record)

    def errors(self) -> list[str]:
        return [text for level, text, _ in self.logs if level == "error"]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


async def _json(send: Send, status: int, value: object, headers: list[Any] | None = None) -> None:
    body = json.dumps(value).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> tuple[bytes, int] | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message["body"])
        if not message.get("more_body", False):
            return b"".join(chunks), len(chunks)


def _number(query: dict[str, list[str]], name: str, default: float) -> float:
    try:
        return max(0.0, min(float(query[name][0]), 1e6))
    except (KeyError, ValueError):
        return default


def raw_app(log: AppLog) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                log.events.append(("lifespan", message["type"]))
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        path = scope["path"]
        query = parse_qs(scope["query_string"].decode())
        if path == "/hello":
            await _json(send, 200, {"hello": "world"})
        elif path == "/echo":
            got = await _read_body(receive)
            if got is None:
                log.events.append(("echo-disconnect", None))
                return
            body, chunks = got
            await _json(send, 200, {"length": len(body), "sha": digest(body), "chunks": chunks})
        elif path.startswith("/scope"):
            shown = {k: v for k, v in scope.items() if k not in ("headers", "state", "asgi")}
            shown = {k: v.decode() if isinstance(v, bytes) else v for k, v in shown.items()}
            shown["headers"] = [[k.decode(), v.decode()] for k, v in scope["headers"]]
            shown["asgi"] = scope["asgi"]
            shown["state"] = sorted(scope["state"])
            await _json(send, 200, shown)
        elif path == "/slow":
            await trio.sleep(_number(query, "delay", 0.2))
            await _json(send, 200, {"slept": True})
        elif path == "/sse":
            await _sse(scope, receive, send, log, int(_number(query, "n", 1000000)))
        elif path == "/boom":
            raise RuntimeError("secret internal detail")
        elif path == "/boom-after-start":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            raise RuntimeError("secret internal detail")
        elif path == "/noresponse":
            return
        elif path == "/ignore-body":
            await _json(send, 200, {"ignored": True})
        elif path == "/first-chunk":  # asks for the body (a 100 goes out), reads one chunk only
            message = await receive()
            await _json(send, 200, {"first": len(message.get("body", b""))})
        elif path == "/bad-header":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"x", b"a\r\nb")]}
            )
        elif path == "/chunked":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for part in (b"one,", b"two,", b"three"):
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        else:
            await _json(send, 404, {"detail": "Not Found"})

    return app


async def _sse(scope: Scope, receive: Receive, send: Send, log: AppLog, count: int) -> None:
    """``count`` frames then ``[DONE]``; stops as soon as ``receive()`` says disconnect."""
    if await _read_body(receive) is None:
        return  # the client left before the body arrived
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            message = await receive()
            assert message["type"] == "http.disconnect", message
            log.events.append(("sse-disconnect", scope["path"]))
            log.disconnected.set()
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        for i in range(count):
            await send(
                {"type": "http.response.body", "body": b"data: %d\n\n" % i, "more_body": True}
            )
            await trio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        nursery.cancel_scope.cancel()


def fastapi_app(log: AppLog) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        log.events.append(("lifespan", "startup"))
        yield {"greeting": "hello from lifespan"}
        log.events.append(("lifespan", "shutdown"))

    app = FastAPI(lifespan=lifespan)

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": "Internal Server Error"}, status_code=500)

    app.add_exception_handler(Exception, on_error)

    @app.get("/v1/health/")
    async def health(request: Request) -> dict[str, str]:
        return {"status": "ok", "greeting": request.state.greeting}

    @app.post("/v1/items/")
    async def create(item: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(item, sort_keys=True).encode()
        return {"item": item, "sha": digest(text)}

    @app.get("/v1/fail")
    async def fail() -> None:
        raise RuntimeError("secret internal detail")

    @app.post("/v1/stream")
    async def stream(request: Request) -> StreamingResponse:
        spec = await request.json()
        count = int(spec.get("n", 5))

        async def frames() -> AsyncIterator[bytes]:
            sent = 0
            try:
                for i in range(count):
                    yield (
                        b"data: "
                        + json.dumps({"seq": i, "message_type": "ping"}).encode()
                        + b"\n\n"
                    )
                    sent += 1
                    await trio.sleep(float(spec.get("interval", 0.01)))
                yield b"data: [DONE]\n\n"
            finally:
                if sent < count:  # Starlette stopped the stream: it saw http.disconnect
                    log.events.append(("fastapi-sse-stopped", sent))
                    log.disconnected.set()

        return StreamingResponse(frames(), media_type="text/event-stream")

    return app


def parse_responses(
    data: bytes, methods: list[bytes] | None = None
) -> list[tuple[int, dict[str, str], bytes]]:
    """Every complete response in ``data`` (an h11 client parses them, in order)."""
    conn = h11.Connection(h11.CLIENT)
    out: list[tuple[int, dict[str, str], bytes]] = []
    conn.receive_data(data)
    conn.receive_data(b"")
    for method in methods or [b"GET"] * 100:
        conn.send(h11.Request(method=method, target="/", headers=[("host", "x")]))
        conn.send(h11.EndOfMessage())
        status, headers, body = 0, {}, b""
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return out
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.InformationalResponse):
                continue
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                out.append((status, headers, body))
                break
            else:
                return out
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return out
        conn.start_next_cycle()
    return out
