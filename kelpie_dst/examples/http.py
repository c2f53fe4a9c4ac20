"""A tiny HTTP/1.1 server (h11 behind ``trio.serve_tcp``) and the two-node workload of issue #3.

The server keeps connections alive and answers ``GET /echo/<text>`` with ``<text>`` and
``POST /count`` with the request count. The workload runs it on node "web", talks to it with
httpx and httpx2 (the anthropic SDK's client) and with a raw TCP echo, and checks the answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import h11
import httpx
import trio

import kelpie_dst

PORT = 8080
ECHO_PORT = 7000
UDP_PORT = 9000


async def serve_http(stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    count = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data and conn.their_state is h11.IDLE:
                return
            conn.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            count += 1
            target = event.target.decode()
            body = target.removeprefix("/echo/") if target.startswith("/echo/") else str(count)
            payload = body.encode()
            headers = [("content-length", str(len(payload))), ("content-type", "text/plain")]
            await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)))
            await stream.send_all(conn.send(h11.Data(data=payload)))
            await stream.send_all(conn.send(h11.EndOfMessage()))
        elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()
                continue
            return
        elif isinstance(event, h11.EndOfMessage | h11.Data):
            continue


async def serve_echo(stream: trio.SocketStream) -> None:
    async for data in stream:
        await stream.send_all(data)


async def serve_udp_echo() -> None:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    await sock.bind(("0.0.0.0", UDP_PORT))
    while True:
        data, source = await sock.recvfrom(2048)
        await sock.sendto(data, source)


async def web_node(node: kelpie_dst.Node) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_tcp, _quiet(serve_http), PORT)
        nursery.start_soon(trio.serve_tcp, _quiet(serve_echo), ECHO_PORT)
        nursery.start_soon(serve_udp_echo)


async def udp_exchange(count: int) -> list[int]:
    """Send ``count`` numbered datagrams to the echo port; return what came back, in order."""
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    received: list[int] = []
    with sock:
        await sock.connect(("web", UDP_PORT))
        for i in range(count):
            await sock.send(str(i).encode())
            await trio.sleep(0.001)
        with trio.move_on_after(2):
            while True:
                received.append(int(await sock.recv(2048)))
    return received


def _quiet(
    handler: Callable[[trio.SocketStream], Awaitable[None]],
) -> Callable[[trio.SocketStream], Awaitable[None]]:
    async def run(stream: trio.SocketStream) -> None:
        try:
            await handler(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            pass  # the client went away or the network broke the connection

    return run


async def main(sim: kelpie_dst.Simulation) -> None:
    """Two nodes: "web" serves; the main node is the client. Tolerates network faults."""
    import httpx2

    sim.add_node("web", web_node)
    await trio.sleep(0.01)
    ok = 0
    async with (
        httpx.AsyncClient(base_url=f"http://web:{PORT}", timeout=5.0) as client,
        httpx2.AsyncClient(base_url=f"http://web:{PORT}", timeout=5.0) as client2,
    ):
        for i in range(10):
            for name, c in (("httpx", client), ("httpx2", client2)):
                try:
                    response = await c.get(f"/echo/{name}-{i}")
                except (httpx.TransportError, httpx2.TransportError) as error:
                    kelpie_dst.log("http error", client=name, error=type(error).__name__)
                    continue
                assert response.text == f"{name}-{i}", response.text
                ok += 1
            await trio.sleep(0.5)
    for i in range(5):
        try:
            with trio.fail_after(10):
                stream = await trio.open_tcp_stream("web", ECHO_PORT)
                async with stream:
                    message = f"echo {i} ".encode() * 100
                    await stream.send_all(message)
                    received = b""
                    while len(received) < len(message):
                        chunk = await stream.receive_some(65536)
                        assert chunk, "EOF before the echo came back"
                        received += chunk
                    assert received == message
                    ok += 1
        except (OSError, trio.BrokenResourceError, trio.TooSlowError) as error:
            kelpie_dst.log("echo error", error=type(error).__name__)
    echoed = await udp_exchange(20)
    assert set(echoed) <= set(range(20)), echoed  # lost, duplicated, reordered: never invented
    kelpie_dst.log("done", ok=ok, datagrams=echoed)
