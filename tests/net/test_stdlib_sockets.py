"""No way out (issue #14): the standard library's sockets never reach the host's network."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
import trio

import kelpie_dst
from kelpie_dst import FailureKind, HostNetworkError


@pytest.fixture
def real_server() -> Iterator[tuple[int, list[object]]]:
    """A real TCP server on the host's 127.0.0.1 that records anything that reaches it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    seen: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            seen.append(conn.recv(100))
            conn.sendall(b"real data")
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join()
    server.close()


def test_create_connection_to_a_real_server_does_not_reach_it(
    real_server: tuple[int, list[object]],
) -> None:
    port, seen = real_server

    async def main() -> bytes:
        sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        sock.sendall(b"hello")
        return sock.recv(100)

    result = kelpie_dst.run(main, seed=1)
    assert result.failure is not None and result.failure.kind is FailureKind.NONDETERMINISM
    message = result.failure.message
    assert "socket.create_connection (uses socket.socket.connect)" in message
    assert f"{__file__}:" in message and "(in main)" in message
    assert len(message.splitlines()) == 1
    assert seen == []  # nothing reached the host


def test_a_caught_refusal_still_fails_the_run(real_server: tuple[int, list[object]]) -> None:
    port, seen = real_server

    async def main() -> str:
        try:
            socket.create_connection(("127.0.0.1", port))
        except OSError as error:  # HostNetworkError is a PermissionError
            assert isinstance(error, HostNetworkError) and error.errno == errno.EPERM
            return "caught"
        return "connected"

    result = kelpie_dst.run(main, seed=1)
    assert result.value == "caught"
    assert result.failure is not None and result.failure.kind is FailureKind.NONDETERMINISM
    assert seen == []


def test_from_stdlib_socket_refuses_a_real_socket() -> None:
    real = socket.socket()

    async def main() -> None:
        trio.socket.from_stdlib_socket(real)

    try:
        result = kelpie_dst.run(main, seed=1)
    finally:
        real.close()
    assert result.failure is not None and result.failure.kind is FailureKind.NONDETERMINISM
    assert "trio.socket.from_stdlib_socket at " in result.failure.message
    assert "real socket of the host" in result.failure.message


async def stdlib_listener(sim: kelpie_dst.Simulation) -> list[object]:
    """A server made of stdlib sockets (as hypercorn makes them), wrapped for trio."""

    async def server(node: kelpie_dst.Node) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", 7000))
        sock.setblocking(False)
        sock.listen(16)
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        while True:
            stream = await listener.accept()
            async with stream:
                await stream.send_all(b"echo:" + await stream.receive_some(100))

    sim.add_node("srv", server)
    await trio.sleep(0.1)
    replies: list[object] = [socket.getaddrinfo("srv", 7000)[0][4], socket.gethostname()]
    for i in range(3):
        stream = await trio.open_tcp_stream("srv", 7000)
        async with stream:
            await stream.send_all(f"m{i}".encode())
            replies.append(await stream.receive_some(100))
    return replies


def test_stdlib_sockets_passed_to_trio_serve_on_the_simulated_network() -> None:
    first = kelpie_dst.run(stdlib_listener, seed=3)
    again = kelpie_dst.run(stdlib_listener, seed=3)
    assert first.ok, first.failure
    assert first.value == [("10.0.0.2", 7000), "main", b"echo:m0", b"echo:m1", b"echo:m2"]
    assert first.trace_hash == again.trace_hash
    assert [(call, site.split(":")[0]) for call, site, _n in first.redirected] == [
        ("socket.gethostname", __name__)
    ]


def test_nonblocking_stdlib_sockets_are_served() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[object]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 7001))
        sock.listen()
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            sock.accept()
        client = await trio.open_tcp_stream("127.0.0.1", 7001)
        await trio.sleep(0.1)
        conn, _address = sock.accept()
        conn.setblocking(False)
        with pytest.raises(BlockingIOError):
            conn.recv(10)
        await client.send_all(b"ping")
        await trio.sleep(0.1)
        got = conn.recv(10)
        conn.sendall(b"pong")
        return [got, await client.receive_some(10), isinstance(conn, socket.socket)]

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure
    assert result.value == [b"ping", b"pong", True]


def test_name_lookups_are_simulated_and_the_host_is_untouched_after() -> None:
    async def main() -> list[object]:
        try:
            socket.getaddrinfo("no-such-host.example", 80)
        except socket.gaierror as error:
            unknown: object = error.errno
        return [
            socket.gethostbyname("localhost"),
            socket.getaddrinfo("10.0.0.9", 80, type=socket.SOCK_STREAM)[0][4],
            socket.gethostname(),
            unknown == socket.EAI_NONAME,
        ]

    result = kelpie_dst.run(main, seed=1, guards="strict", guard_allow=[__name__])
    assert result.ok, result.failure
    assert result.value == ["127.0.0.1", ("10.0.0.9", 80), "main", True]
    with socket.socket() as after:  # the real class again once the run is over
        assert type(after) is not kelpie_dst.net.StdlibSocket


async def asgi_app(scope: dict[str, object], receive: object, send: object) -> None:
    """A minimal ASGI app with lifespan support, as Starlette or FastAPI would have."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()  # type: ignore[operator]
            kind = message["type"]
            await send({"type": kind + ".complete"})  # type: ignore[operator]
            if kind == "lifespan.shutdown":
                return
    path = str(scope["path"]).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"hello " + path})  # type: ignore[operator]


async def hypercorn_program(sim: kelpie_dst.Simulation) -> list[tuple[int, str, str | None]]:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    async def web(node: kelpie_dst.Node) -> None:
        config = Config()
        config.bind = ["0.0.0.0:8000"]
        config.accesslog = None
        config.errorlog = None
        await serve(asgi_app, config)  # type: ignore[arg-type]

    sim.add_node("web", web)
    await trio.sleep(1)
    replies = []
    async with httpx.AsyncClient() as client:
        for i in range(3):
            response = await client.get(f"http://web:8000/p{i}")
            replies.append((response.status_code, response.text, response.headers.get("date")))
    return replies


def test_hypercorn_serves_an_asgi_app_unmodified_and_deterministically() -> None:
    pytest.importorskip("hypercorn")
    first = kelpie_dst.run(hypercorn_program, seed=5)
    again = kelpie_dst.run(hypercorn_program, seed=5)
    assert first.ok, first.failure
    assert first.value == [(200, f"hello /p{i}", "Thu, 01 Jan 2026 00:00:01 GMT") for i in range(3)]
    assert first.trace_hash == again.trace_hash
    # hypercorn's `from time import time` is served the virtual wall clock
    assert any(call == "time.time" for call, _site, _n in first.redirected)
