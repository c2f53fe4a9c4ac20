"""The HTTP server on real loopback sockets: ASGI, keep-alive, pipelining, limits, errors."""

from __future__ import annotations

import json

import httpx
import pytest
import trio

from .apps import AppLog, digest, fastapi_app, parse_responses
from .helpers import connect, exchange, read_all, read_until, running

pytestmark = pytest.mark.trio
EXPECT = b"expect: 100-continue\r\n\r\n"


async def test_json_and_body_roundtrip_with_httpx() -> None:
    async with (
        running() as (server, log),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client,
    ):
        assert (await client.get("/hello")).json() == {"hello": "world"}
        payload = bytes(range(256)) * 1000
        response = await client.post("/echo", content=payload)
        assert response.status_code == 200
        assert response.json()["length"] == len(payload)
        assert response.json()["sha"] == digest(payload)
    assert [(r.method, r.target, r.status) for r in log.access] == [
        ("GET", "/hello", 200),
        ("POST", "/echo", 200),
    ]
    assert log.access[0].bytes_sent == len(b'{"hello": "world"}')
    assert all(r.duration >= 0 for r in log.access)
    assert log.errors() == []


async def test_scope_fields() -> None:
    async with running(root_path="/api") as (server, _), httpx.AsyncClient() as client:
        url = f"http://127.0.0.1:{server.port}/scope?x=1&y=%20z"
        scope = (await client.get(url, headers={"X-Test": "Yes"})).json()
    assert scope["type"] == "http"
    assert scope["method"] == "GET"
    assert scope["path"] == "/scope"
    assert scope["raw_path"] == "/scope"
    assert scope["query_string"] == "x=1&y=%20z"
    assert scope["root_path"] == "/api"
    assert scope["scheme"] == "http"
    assert scope["http_version"] == "1.1"
    assert scope["asgi"]["version"] == "3.0"
    assert ["x-test", "Yes"] in scope["headers"]  # names lowercased, values as sent
    assert scope["client"][0] == "127.0.0.1"
    assert scope["server"] == ["127.0.0.1", server.port]


async def test_percent_decoding_and_absolute_form_targets() -> None:
    async with running() as (server, _):
        raw = await exchange(
            server,
            b"GET /sc%6fpe/%E2%9C%93?q HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        scope = json.loads(parse_responses(raw)[0][2])
        assert scope["path"] == "/scope/\u2713"
        assert scope["raw_path"] == "/sc%6fpe/%E2%9C%93"
        raw = await exchange(
            server, b"GET http://example.com/hello HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
        assert parse_responses(raw)[0][0] == 200


async def test_keep_alive_reuses_one_connection() -> None:
    async with (
        running() as (server, _),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client,
    ):
        for i in range(20):
            assert (await client.post("/echo", content=b"x" * i)).json()["length"] == i
        stats = server.statistics()
    assert stats.connections_accepted == 1
    assert stats.requests == 20


async def test_pipelined_requests_are_answered_in_order() -> None:
    requests = (
        b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n"
        b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nabcde"
        b"GET /chunked HTTP/1.1\r\nhost: x\r\n\r\n"
        b"GET /scope HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    async with running() as (server, log):
        raw = await exchange(server, requests)
    responses = parse_responses(raw)
    assert [status for status, _, _ in responses] == [200, 200, 200, 200]
    assert json.loads(responses[1][2])["sha"] == digest(b"abcde")
    assert responses[2][1]["transfer-encoding"] == "chunked"
    assert responses[2][2] == b"one,two,three"
    assert json.loads(responses[3][2])["path"] == "/scope"
    assert server.statistics().connections_accepted == 1
    assert len(log.access) == 4


async def test_pipelined_bytes_arriving_during_a_stream_are_kept() -> None:
    """A request pipelined while an SSE response streams is served after it."""
    async with running() as (server, _):
        stream = await connect(server)
        async with stream:
            await stream.send_all(b"GET /sse?n=5 HTTP/1.1\r\nhost: x\r\n\r\n")
            await read_until(stream, b"data: 1\n\n")
            await stream.send_all(b"GET /hello HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            raw = await read_all(stream)
    responses = parse_responses(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + raw)
    assert len(responses) == 2
    assert responses[1][2] == b'{"hello": "world"}'


async def test_large_bodies_get_413() -> None:
    async with (
        running(max_body_bytes=1000) as (server, log),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client,
    ):
        ok = await client.post("/echo", content=b"x" * 1000)
        assert ok.status_code == 200
        declared = await client.post("/echo", content=b"x" * 5000)
        assert declared.status_code == 413
        assert declared.json() == {"detail": "Request body too large: the limit is 1000 bytes"}

        async def chunks():  # no content-length: the limit is found while reading
            for _ in range(10):
                yield b"y" * 300

        streamed = await client.post("/echo", content=chunks())
        assert streamed.status_code == 413
        assert "limit is 1000 bytes" in streamed.json()["detail"]
        assert (await client.get("/hello")).status_code == 200  # a new connection works
    assert [r.status for r in log.access] == [200, 413, 413, 200]
    assert ("echo-disconnect", None) in log.events  # the app saw http.disconnect
    assert log.errors() == []


async def test_chunked_request_bodies() -> None:
    async def chunks():
        for i in range(50):
            yield bytes([i]) * 97

    async with running() as (server, _), httpx.AsyncClient() as client:
        response = await client.post(f"http://127.0.0.1:{server.port}/echo", content=chunks())
    expected = b"".join(bytes([i]) * 97 for i in range(50))
    assert response.json()["sha"] == digest(expected)
    raw_chunked = (
        b"POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n5;ext=1\r\ndefgh\r\n0\r\ntrailer: x\r\n\r\n"
    )
    async with running() as (server, _):
        raw = await exchange(
            server, raw_chunked + b"GET /hello HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
    responses = parse_responses(raw)
    assert json.loads(responses[0][2])["sha"] == digest(b"abcdefgh")
    assert responses[1][0] == 200


async def test_slowloris_headers_time_out_with_408() -> None:
    async with running(header_timeout=0.3) as (server, log):
        stream = await connect(server)
        async with stream:
            start = trio.current_time()
            for piece in (b"GET /hello HTTP/1.1\r\n", b"host: x\r\n", b"x-a: 1\r\n", b"x-b: 2\r\n"):
                try:
                    await stream.send_all(piece)
                except trio.BrokenResourceError:
                    break
                await trio.sleep(0.12)
            raw = await read_all(stream)
            elapsed = trio.current_time() - start
    status, headers, body = parse_responses(raw)[0]
    assert status == 408
    assert headers["connection"] == "close"
    assert "request head took over 0.3s" in json.loads(body)["detail"]
    assert elapsed < 2
    assert [(r.method, r.status) for r in log.access] == [("-", 408)]


async def test_idle_keep_alive_connections_are_closed_quietly() -> None:
    async with running(keep_alive_timeout=0.2) as (server, log):
        stream = await connect(server)
        async with stream:
            await stream.send_all(b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n")
            raw = await read_all(stream, timeout=3)  # ends when the idle connection is closed
    assert [status for status, _, _ in parse_responses(raw)] == [200]
    assert len(log.access) == 1


async def test_slow_request_body_gets_408() -> None:
    async with running(body_timeout=0.2) as (server, log):
        raw = await exchange(
            server, b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc"
        )
    status, _, body = parse_responses(raw)[0]
    assert status == 408
    assert "no request body data for 0.2s" in json.loads(body)["detail"]
    assert log.errors() == []


async def test_handler_errors_are_500_json_without_traceback() -> None:
    async with running() as (server, log):
        raw = await exchange(server, b"GET /boom HTTP/1.1\r\nhost: x\r\n\r\n")
        status, headers, body = parse_responses(raw)[0]
        assert status == 500
        assert json.loads(body) == {"detail": "Internal Server Error"}
        assert headers["content-type"] == "application/json"
        assert b"secret" not in raw and b"Traceback" not in raw
        raw = await exchange(server, b"GET /noresponse HTTP/1.1\r\nhost: x\r\n\r\n")
        assert parse_responses(raw)[0][0] == 500
        raw = await exchange(server, b"GET /boom-after-start HTTP/1.1\r\nhost: x\r\n\r\n")
        assert parse_responses(raw)[0][0] == 500  # the start was not on the wire yet
        raw = await exchange(server, b"GET /bad-header HTTP/1.1\r\nhost: x\r\n\r\n")
        assert parse_responses(raw)[0][0] == 500
        assert b"\r\nx: a" not in raw
    errors = log.errors()
    assert errors[0] == "Exception in ASGI application (GET /boom)"
    assert str(log.logs[0][2]) == "secret internal detail"  # the exception goes to the logger
    assert errors[1] == "ASGI app returned without starting the response (GET /noresponse)"
    assert len(errors) == 4


async def test_fastapi_app_json_errors_lifespan_and_sse() -> None:
    log = AppLog()
    async with (
        running(fastapi_app(log), log) as (server, _),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client,
    ):
        health = await client.get("/v1/health/")
        assert health.json() == {"status": "ok", "greeting": "hello from lifespan"}
        created = await client.post("/v1/items/", json={"name": "a", "n": [1, 2]})
        assert created.json()["item"] == {"name": "a", "n": [1, 2]}
        invalid = await client.post(
            "/v1/items/", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert invalid.status_code == 422
        failed = await client.get("/v1/fail")
        assert failed.status_code == 500
        assert failed.json() == {"detail": "Internal Server Error"}
        async with client.stream("POST", "/v1/stream", json={"n": 4}) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            frames = [line async for line in stream.aiter_lines() if line]
        assert frames[-1] == "data: [DONE]"
        assert [json.loads(f[6:])["seq"] for f in frames[:-1]] == [0, 1, 2, 3]
        assert log.events[0] == ("lifespan", "startup")
    assert log.events[-1] == ("lifespan", "shutdown")
    assert "Exception in ASGI application (GET /v1/fail)" in log.errors()


async def test_client_disconnect_mid_sse_is_seen_by_the_app() -> None:
    async with running() as (server, log):
        stream = await connect(server)
        await stream.send_all(b"GET /sse HTTP/1.1\r\nhost: x\r\n\r\n")
        await read_until(stream, b"data: 3\n\n")
        await stream.aclose()
        with trio.fail_after(5):
            await log.disconnected.wait()
    assert ("sse-disconnect", "/sse") in log.events
    assert log.access[-1].status == 200
    assert log.errors() == []


async def test_client_disconnect_mid_fastapi_stream() -> None:
    log = AppLog()
    async with running(fastapi_app(log), log) as (server, _):
        stream = await connect(server)
        body = b'{"n": 100000, "interval": 0.01}'
        await stream.send_all(
            b"POST /v1/stream HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        await read_until(stream, b'"seq": 5')
        await stream.aclose()
        with trio.fail_after(5):
            await log.disconnected.wait()
    stopped = [sent for kind, sent in log.events if kind == "fastapi-sse-stopped"]
    assert len(stopped) == 1 and 5 <= stopped[0] < 1000, log.events


async def test_malformed_requests_get_400_and_close() -> None:
    cases = [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",  # no Host
        b"GET hello HTTP/1.1\r\nhost: x\r\n\r\n",  # not origin form
        b"GET /caf\xc3\xa9 HTTP/1.1\r\nhost: x\r\n\r\n",  # not ASCII
        b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"GET /hello HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n",
    ]
    async with running() as (server, log):
        for case in cases:
            raw = await exchange(server, case)
            status, headers, body = parse_responses(raw)[0]
            assert status == 400, (case, raw)
            assert headers["connection"] == "close"
            assert json.loads(body)["detail"].startswith("Bad Request")
            assert b"GARBAGE" not in body and b"caf" not in body  # input is not echoed
        raw = await exchange(server, b"GET /hello HTTP/2.0\r\nhost: x\r\n\r\n")
        assert parse_responses(raw)[0][0] == 505
    assert log.errors() == []


async def test_oversized_headers_get_431() -> None:
    async with running(max_header_bytes=2048) as (server, log):
        raw = await exchange(
            server, b"GET /hello HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 5000 + b"\r\n\r\n"
        )
    assert parse_responses(raw)[0][0] == 431
    assert log.access[0].status == 431


async def test_head_has_headers_and_no_body() -> None:
    async with running() as (server, log):
        raw = await exchange(
            server,
            b"HEAD /hello HTTP/1.1\r\nhost: x\r\n\r\n"
            b"GET /hello HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
    head, get = parse_responses(raw, [b"HEAD", b"GET"])
    assert head[0] == 200 and head[2] == b""
    assert head[1]["content-length"] == str(len(get[2]))
    assert get[2] == b'{"hello": "world"}'
    assert log.access[0].bytes_sent == 0


async def test_expect_100_continue() -> None:
    async with running(max_body_bytes=100) as (server, _):
        stream = await connect(server)
        async with stream:
            await stream.send_all(
                b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n" + EXPECT
            )
            interim = await read_until(stream, b"\r\n\r\n")
            assert interim.startswith(b"HTTP/1.1 100 ")
            await stream.send_all(b"hello")
            raw = await read_until(stream, b"}")
            assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["sha"] == digest(b"hello")
        # over the limit: a 413 at once, never a 100
        raw = await exchange(
            server,
            b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 500\r\n" + EXPECT,
        )
        assert raw.startswith(b"HTTP/1.1 413 ")
        # a handler that ignores the body: no 100, the response, then close
        raw = await exchange(
            server,
            b"POST /ignore-body HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n" + EXPECT,
        )
        assert raw.startswith(b"HTTP/1.1 200 ") and b"100 Continue" not in raw


async def test_after_100_continue_the_rest_of_the_body_is_drained_and_the_connection_kept() -> None:
    """The app asked for the body (so a 100 went out) and answered after reading part of it:
    the client sends the rest, the server reads past it and serves the next request on the
    same connection."""
    async with running() as (server, log):
        stream = await connect(server)
        async with stream:
            await stream.send_all(
                b"POST /first-chunk HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n" + EXPECT
            )
            interim = await read_until(stream, b"\r\n\r\n")
            assert interim.startswith(b"HTTP/1.1 100 ")
            await stream.send_all(b"hello")
            first = await read_until(stream, b"}")
            assert first.startswith(b"HTTP/1.1 200 ") and b'"first": 5' in first
            await stream.send_all(b"world" + b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n")
            second = await read_until(stream, b"}")
            assert second.startswith(b"HTTP/1.1 200 ") and b"hello" in second
        assert [r.status for r in log.access] == [200, 200]


async def test_unread_small_body_is_drained_and_the_connection_kept() -> None:
    async with running() as (server, _):
        raw = await exchange(
            server,
            b"POST /ignore-body HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello"
            b"GET /hello HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
    assert [status for status, _, _ in parse_responses(raw)] == [200, 200]


async def test_http10_closes_after_the_response() -> None:
    async with running() as (server, _):
        raw = await exchange(server, b"GET /hello HTTP/1.0\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 ")
    assert raw.endswith(b'{"hello": "world"}')
