"""Graceful shutdown, lifespan and options, on real loopback sockets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import httpx
import pytest
import trio

from kelpie_agent.http import (
    HttpServer,
    HttpServerError,
    LifespanError,
    ServerOptions,
    serve,
)

from .apps import AppLog, fastapi_app, parse_responses, raw_app
from .helpers import connect, read_all

pytestmark = pytest.mark.trio


async def _start(nursery: trio.Nursery, app: Any, log: AppLog, **options: Any) -> HttpServer:
    server: HttpServer = await nursery.start(
        partial(
            serve,
            app,
            "127.0.0.1",
            0,
            ServerOptions(**options),
            logger=log,
            access_log=log.record_access,
        )
    )
    return server


async def _wait_busy(server: HttpServer, requests: int = 1) -> None:
    with trio.fail_after(5):
        while server.statistics().requests < requests:
            await trio.sleep(0.005)


async def test_in_flight_request_finishes_and_new_connections_are_refused() -> None:
    log = AppLog()
    results: list[httpx.Response] = []
    async with trio.open_nursery() as nursery:
        server = await _start(nursery, raw_app(log), log)
        url = f"http://127.0.0.1:{server.port}/slow?delay=0.3"

        async def request() -> None:
            async with httpx.AsyncClient() as client:
                results.append(await client.get(url))

        nursery.start_soon(request)
        await _wait_busy(server)
        start = trio.current_time()
        await server.shutdown(grace=5)
        took = trio.current_time() - start
        assert server.statistics().state == "stopped"
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", server.port)
    assert results[0].status_code == 200
    assert results[0].json() == {"slept": True}
    assert results[0].headers["connection"] == "close"
    assert 0.1 < took < 3
    assert log.events == [("lifespan", "lifespan.startup"), ("lifespan", "lifespan.shutdown")]


async def test_idle_keep_alive_connections_close_at_once() -> None:
    log = AppLog()
    async with trio.open_nursery() as nursery:
        server = await _start(nursery, raw_app(log), log, keep_alive_timeout=60)
        stream = await connect(server)
        await stream.send_all(b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n")
        await _wait_busy(server)
        start = trio.current_time()
        await server.shutdown(grace=30)
        assert trio.current_time() - start < 2
        raw = await read_all(stream)
        await stream.aclose()
    assert [s for s, _, _ in parse_responses(raw)] == [200]


async def test_grace_expiry_cancels_what_is_left() -> None:
    log = AppLog()
    async with trio.open_nursery() as nursery:
        server = await _start(nursery, raw_app(log), log)
        slow = await connect(server)
        await slow.send_all(b"GET /slow?delay=30 HTTP/1.1\r\nhost: x\r\n\r\n")
        sse = await connect(server)
        await sse.send_all(b"GET /sse HTTP/1.1\r\nhost: x\r\n\r\n")
        await _wait_busy(server, 2)
        start = trio.current_time()
        await server.shutdown(grace=0.2)
        assert trio.current_time() - start < 2
        assert await read_all(slow) == b""  # cut off: no response at all
        streamed = await read_all(sse)
        assert streamed.startswith(b"HTTP/1.1 200 ") and not streamed.endswith(b"0\r\n\r\n")
        await slow.aclose()
        await sse.aclose()
    assert any("grace of 0.2s expired: cancelling 2" in text for _, text, _ in log.logs)


async def test_external_cancellation_stops_the_server() -> None:
    log = AppLog()
    with trio.move_on_after(0.2):
        async with trio.open_nursery() as nursery:
            server = await _start(nursery, raw_app(log), log)
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", server.port)


async def test_fastapi_lifespan_state_reaches_requests() -> None:
    log = AppLog()
    async with trio.open_nursery() as nursery:
        server = await _start(nursery, fastapi_app(log), log)
        async with httpx.AsyncClient() as client:
            health = await client.get(f"http://127.0.0.1:{server.port}/v1/health/")
        assert health.json()["greeting"] == "hello from lifespan"
        assert log.events == [("lifespan", "startup")]
        await server.shutdown()
    assert log.events == [("lifespan", "startup"), ("lifespan", "shutdown")]


def _lifespan_app(
    behaviour: str,
) -> Callable[[Any, Any, Any], Awaitable[None]]:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            raise AssertionError("no requests in these tests")
        await receive()
        if behaviour == "fail":
            await send(
                {"type": "lifespan.startup.failed", "message": "Traceback...\nValueError: no db"}
            )
        elif behaviour == "raise":
            raise KeyError("lifespan unsupported")
        elif behaviour == "hang":
            await trio.sleep_forever()

    return app


@pytest.mark.parametrize(
    ("behaviour", "mode", "message"),
    [
        ("fail", "auto", "the application's lifespan startup failed: ValueError: no db"),
        ("raise", "on", "the application does not support the lifespan protocol: KeyError"),
        ("hang", "auto", "the application's lifespan startup took over 0.2s"),
    ],
)
async def test_lifespan_startup_failures_stop_the_server(
    behaviour: str, mode: str, message: str
) -> None:
    log = AppLog()
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server = HttpServer(
        _lifespan_app(behaviour), ServerOptions(lifespan=mode, lifespan_timeout=0.2), logger=log
    )
    with pytest.raises(LifespanError) as caught:
        await server.serve_listeners(listeners)
    assert str(caught.value).startswith(message)
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)  # the listener was closed


async def test_lifespan_auto_serves_apps_without_lifespan_and_off_skips_it() -> None:
    for mode, app_log_expected in (("auto", []), ("off", [])):
        log = AppLog()
        async with trio.open_nursery() as nursery:
            app = raw_app(log) if mode == "off" else _no_lifespan(raw_app(log))
            server = await _start(nursery, app, log, lifespan=mode)
            async with httpx.AsyncClient() as client:
                assert (
                    await client.get(f"http://127.0.0.1:{server.port}/hello")
                ).status_code == 200
            await server.shutdown()
        assert log.events == app_log_expected
        assert log.errors() == []


def _no_lifespan(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            raise ValueError("this app does not do lifespan")
        await app(scope, receive, send)

    return wrapped


async def test_a_server_serves_once_and_shutdown_is_idempotent() -> None:
    log = AppLog()
    async with trio.open_nursery() as nursery:
        server = await _start(nursery, raw_app(log), log)
        await server.shutdown()
        await server.shutdown()
    with pytest.raises(HttpServerError, match="serves once"):
        await server.serve("127.0.0.1", 0)
    unused = HttpServer(raw_app(log))
    await unused.shutdown()
    assert unused.statistics().state == "stopped"
    with pytest.raises(ValueError, match="grace"):
        await unused.shutdown(grace=-1)


async def test_options_are_validated_with_one_line_errors() -> None:
    with pytest.raises(
        ValueError,
        match=r"^ServerOptions.header_timeout must be a positive number of seconds, got -1$",
    ):
        ServerOptions(header_timeout=-1)
    with pytest.raises(ValueError, match="max_body_bytes must be a positive number of bytes"):
        ServerOptions(max_body_bytes=0)
    with pytest.raises(ValueError, match="lifespan must be one of"):
        ServerOptions(lifespan="maybe")
    with pytest.raises(ValueError, match="root_path"):
        ServerOptions(root_path="api/")
    with pytest.raises(TypeError, match="ServerOptions"):
        HttpServer(raw_app(AppLog()), {"max_body_bytes": 1})  # type: ignore[arg-type]
    assert ServerOptions().keep_alive_timeout == 5.0


async def test_an_idle_connection_closed_at_once_does_not_end_the_grace() -> None:
    """The drain ends with the last connection, not the first: an idle keep-alive connection
    closed at once leaves a slow request to run until the grace cancels it (rtN, session 18)."""
    log = AppLog()
    async with trio.open_nursery() as nursery:
        server = await _start(nursery, raw_app(log), log, keep_alive_timeout=60)
        idle = await connect(server)
        await idle.send_all(b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += await idle.receive_some(65536)
        slow = await connect(server)
        await slow.send_all(b"GET /slow?delay=5 HTTP/1.1\r\nhost: x\r\n\r\n")
        await _wait_busy(server, 2)
        await server.shutdown(grace=0.2)
        assert await read_all(slow) == b""  # cut at the grace: no response at all
        assert server.statistics().connections_open == 0
        await slow.aclose()
        await idle.aclose()
    assert any("grace of 0.2s expired: cancelling 1" in text for _, text, _ in log.logs)
