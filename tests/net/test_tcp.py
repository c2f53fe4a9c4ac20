"""Simulated TCP: conformance, addressing, timing, partitions, crashes and resets."""

import socket

import pytest
import trio
import trio.testing

import kelpie_dst


async def stream_pair(window: int | None = None) -> tuple[trio.SocketStream, trio.SocketStream]:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    sock = trio.socket.socket()
    if window:
        listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)
    await sock.connect(("127.0.0.1", listener.socket.getsockname()[1]))
    client = trio.SocketStream(sock)
    server = await listener.accept()
    await listener.aclose()
    return client, server


async def clogged_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    client, server = await stream_pair(window=1)
    await client.send_all(b"\0")  # fill the one-byte windows: the next send blocks
    await server.send_all(b"\0")
    return client, server


@pytest.mark.parametrize("seed", range(5))
def test_simulated_tcp_passes_trios_stream_conformance_suite(seed: int) -> None:
    with kelpie_dst.open_simulation(seed=seed) as handle:
        handle.step(trio.testing.check_half_closeable_stream, stream_pair, clogged_pair)


async def echo(stream: trio.SocketStream) -> None:
    try:
        async for data in stream:
            await stream.send_all(data)
    except trio.BrokenResourceError:
        pass  # a reset connection is the client's problem, not the server's


async def echo_node(node: kelpie_dst.Node) -> None:
    await trio.serve_tcp(echo, 7000)  # wildcard bind


def test_names_addresses_refusal_and_ephemeral_ports() -> None:
    async def main(sim: kelpie_dst.Simulation) -> dict[str, object]:
        sim.add_node("server", echo_node)
        await trio.sleep(0.01)
        out: dict[str, object] = {}
        for host in ("server", "10.0.0.2"):
            stream = await trio.open_tcp_stream(host, 7000)
            await stream.send_all(b"ping")
            out[host] = await stream.receive_some(10)
            out[f"{host} local"] = stream.socket.getsockname()
            out[f"{host} peer"] = stream.socket.getpeername()
            await stream.aclose()
        with pytest.raises(OSError, match="all attempts to connect"):
            await trio.open_tcp_stream("server", 7001)
        with pytest.raises(OSError):
            await trio.open_tcp_stream("nowhere", 7000)
        return out

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure
    out = result.value
    assert isinstance(out, dict)
    assert out["server"] == out["10.0.0.2"] == b"ping"
    assert out["server peer"] == ("10.0.0.2", 7000)
    # ephemeral ports count up deterministically from 49152 on the client's own address
    assert out["server local"] == ("10.0.0.1", 49152)
    assert out["10.0.0.2 local"] == ("10.0.0.1", 49153)


def test_localhost_reaches_the_calling_nodes_own_listener() -> None:
    async def server(node: kelpie_dst.Node) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_tcp, echo, 5000)
            await trio.sleep(0.01)
            stream = await trio.open_tcp_stream("localhost", 5000)
            await stream.send_all(b"self")
            node.durable["got"] = await stream.receive_some(10)
            nursery.cancel_scope.cancel()

    async def main(sim: kelpie_dst.Simulation) -> object:
        node = sim.add_node("a", server)
        await trio.sleep(1)
        with pytest.raises(OSError):  # nothing listens on the main node's own 5000
            await trio.open_tcp_stream("localhost", 5000)
        return node.durable["got"]

    result = kelpie_dst.run(main, seed=2)
    assert result.ok and result.value == b"self", result.failure


def test_latency_and_bandwidth_take_virtual_time() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[float, float]:
        sim.add_node("server", echo_node)
        await trio.sleep(0.01)
        stream = await trio.open_tcp_stream("server", 7000)
        start = trio.current_time()
        await stream.send_all(b"x")
        await stream.receive_some(1)
        small = trio.current_time() - start
        payload = b"y" * 1_000_000
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.send_all, payload)
            got = 0
            while got < len(payload):
                got += len(await stream.receive_some(65536))
        big = trio.current_time() - start
        return small, big

    small, big = kelpie_dst.run(main, seed=3).value  # type: ignore[misc]
    assert 0.001 <= small <= 0.004  # one round trip at 0.5-2 ms per direction
    # 1 MB at 1 Gbit/s takes 8 ms to serialize; the echo pipelines the way back
    assert 1_000_000 / 125_000_000 <= big <= 3 * 1_000_000 / 125_000_000


def test_partition_stalls_data_and_times_out_connects_until_healed() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[str]:
        sim.add_node("server", echo_node)
        await trio.sleep(0.01)
        events = []
        stream = await trio.open_tcp_stream("server", 7000)
        sim.network.partition(["main"], ["server"])
        await stream.send_all(b"held")
        with trio.move_on_after(5):
            await stream.receive_some(10)
            events.append("received during partition")
        events.append("stalled")
        with trio.move_on_after(5) as scope:
            await trio.open_tcp_stream("server", 7000)
        if scope.cancelled_caught:
            events.append("connect stalled")
        sim.network.heal()
        events.append(f"after heal: {(await stream.receive_some(10)).decode()}")
        return events

    result = kelpie_dst.run(main, seed=4)
    assert result.ok, result.failure
    assert result.value == ["stalled", "connect stalled", "after heal: held"]


def test_one_way_partition_blocks_one_direction_only() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[bool, bool]:
        received: list[bytes] = []

        async def sink(stream: trio.SocketStream) -> None:
            received.append(await stream.receive_some(10))
            await trio.sleep_forever()

        async def server(node: kelpie_dst.Node) -> None:
            await trio.serve_tcp(sink, 7000)

        sim.add_node("server", server)
        await trio.sleep(0.01)
        stream = await trio.open_tcp_stream("server", 7000)
        sim.network.partition(["server"], ["main"], one_way=True)  # server -> main cut
        await stream.send_all(b"to-server")
        await trio.sleep(1)
        return bool(received), sim.network.reachable("10.0.0.2", "10.0.0.1")

    result = kelpie_dst.run(main, seed=5)
    assert result.value == (True, False), result.failure


def test_crash_resets_peers_and_drops_listeners() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[str]:
        server = sim.add_node("server", echo_node)
        await trio.sleep(0.01)
        stream = await trio.open_tcp_stream("server", 7000)
        sim.crash(server)
        events = []
        try:
            await stream.send_all(b"x")
            await stream.receive_some(10)
        except trio.BrokenResourceError:
            events.append("reset")
        sim.restart(server, after=1)
        with trio.move_on_after(0.5) as scope:
            await trio.open_tcp_stream("server", 7000)
        events.append("down: connect stalls" if scope.cancelled_caught else "down: connected?")
        await trio.sleep(1)
        again = await trio.open_tcp_stream("server", 7000)  # the restarted node listens again
        await again.send_all(b"back")
        events.append((await again.receive_some(10)).decode())
        return events

    result = kelpie_dst.run(main, seed=6)
    assert result.ok, result.failure
    assert result.value == ["reset", "down: connect stalls", "back"]


def test_reset_fault_breaks_streams_with_broken_resource_error() -> None:
    async def main(sim: kelpie_dst.Simulation) -> int:
        sim.add_node("server", echo_node)
        await trio.sleep(0.01)
        broken = 0
        for _ in range(20):
            stream = await trio.open_tcp_stream("server", 7000)
            try:
                for _ in range(10):
                    await stream.send_all(b"x" * 100)
                    await stream.receive_some(1000)
            except trio.BrokenResourceError:
                broken += 1
            await stream.aclose()
        return broken

    result = kelpie_dst.run(main, seed=7, faults=["network.reset=0.05"])
    assert result.ok, result.failure
    assert result.value and result.value > 0  # type: ignore[operator]
    assert result.faults_fired["network.reset"] >= result.value  # type: ignore[operator]


def test_hour_long_virtual_sleeps_cost_milliseconds() -> None:
    async def main(sim: kelpie_dst.Simulation) -> bytes:
        sim.add_node("server", echo_node)
        stream = None
        for _ in range(24):
            await trio.sleep(3600)
        stream = await trio.open_tcp_stream("server", 7000)
        await stream.send_all(b"a day later")
        return await stream.receive_some(100)

    result = kelpie_dst.run(main, seed=8)
    assert result.value == b"a day later"
    assert result.virtual_time > 86400
    assert result.wall_seconds < 30  # sanity only; the figure is reported by the bench
