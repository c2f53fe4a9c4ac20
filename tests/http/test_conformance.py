"""Hypothesis: random bytes and mutated valid requests never break the server.

Each example serves one connection over an in-memory stream pair under ``trio.run`` with an
autojumping clock (timeouts cost no real time). The invariants: the connection ends without an
exception escaping; the server logs no error; the bytes sent back are a sequence of complete
HTTP responses, one per access-log record that has a status, with the same statuses, from the
expected set; nothing sent back mentions a traceback.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kelpie_agent.http import HttpServer, ServerOptions

from .apps import AppLog, parse_responses, raw_app

OPTIONS = ServerOptions(
    max_body_bytes=2000, max_header_bytes=1024, header_timeout=1, body_timeout=1
)
SERVER_ERRORS = {400, 408, 413, 431, 501, 505}
STATUSES = {200, 404} | SERVER_ERRORS

VALID = [
    b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n",
    b"HEAD /hello HTTP/1.1\r\nhost: x\r\n\r\n",
    b"GET /chunked?x=1 HTTP/1.1\r\nhost: x\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 11\r\n\r\nhello world",
    b"POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\nexpect: 100-continue\r\n\r\nabc",
    b"POST /ignore-body HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\nabcd",
    b"GET /scope HTTP/1.0\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nhost: x\r\n\r\n",
    b"GET /slow?delay=0.5 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
]


def serve_bytes(chunks: list[bytes]) -> tuple[bytes, AppLog]:
    """Send ``chunks`` (with a pause after each), half-close, return what came back."""
    log = AppLog()
    server = HttpServer(raw_app(log), OPTIONS, logger=log, access_log=log.record_access)
    received = bytearray()

    async def main() -> None:
        client, server_side = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve_stream, server_side)

            async def read() -> None:
                while chunk := await client.receive_some(65536):
                    received.extend(chunk)

            nursery.start_soon(read)
            try:
                for chunk in chunks:
                    await client.send_all(chunk)
                    await trio.sleep(0.3)
                await client.send_eof()
            except trio.BrokenResourceError:
                pass  # the server closed first

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return bytes(received), log


def check(chunks: list[bytes]) -> None:
    out, log = serve_bytes(chunks)
    assert log.errors() == [], log.errors()
    assert b"Traceback" not in out
    answered = [record for record in log.access if record.status]
    methods = [r.method.encode() if r.method != "-" else b"GET" for r in answered]
    responses = parse_responses(out, methods)
    assert [status for status, _, _ in responses] == [r.status for r in answered], out
    assert {r.status for r in answered} <= STATUSES, log.access
    for status, headers, _ in responses:
        if status in SERVER_ERRORS:  # answered by the server itself (the app sends 404 only)
            assert headers["content-type"] == "application/json"
            assert headers["connection"] == "close"


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(data[last:point])
        last = point
    pieces.append(data[last:])
    return [p for p in pieces if p]


@st.composite
def mutated_requests(draw: st.DrawFn) -> list[bytes]:
    data = bytearray(b"".join(draw(st.lists(st.sampled_from(VALID), min_size=1, max_size=4))))
    for _ in range(draw(st.integers(0, 4))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        fragment = draw(
            st.one_of(
                st.binary(min_size=1, max_size=8),
                st.sampled_from(
                    [b"\r\n", b"\n", b":", b" ", b"\x00", b"\r\n\r\n", b"chunked", b"9999999"]
                ),
            )
        )
        if action == "insert":
            data[position:position] = fragment
        elif action == "delete":
            del data[position : position + len(fragment)]
        elif action == "replace":
            data[position : position + len(fragment)] = fragment
        else:
            data[position:position] = data[max(0, position - 40) : position]
    cuts = draw(st.lists(st.integers(0, 10_000), max_size=4))
    return _split(bytes(data), cuts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=3))
def test_random_bytes(chunks: list[bytes]) -> None:
    check(chunks)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_requests())
def test_mutated_valid_requests(chunks: list[bytes]) -> None:
    check(chunks)


def test_the_valid_requests_are_answered_200() -> None:
    out, log = serve_bytes([b"".join(VALID)])
    assert [r.status for r in log.access] == [200, 200, 200, 200, 200, 200, 200, 200]
    assert len(parse_responses(out, [r.method.encode() for r in log.access])) == 8
