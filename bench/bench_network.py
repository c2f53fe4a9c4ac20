"""Simulated HTTP requests/s, against an in-memory baseline with no network at all.

* baseline: an h11 client and the example h11 server over ``trio.testing.memory_stream_pair``
  under bare ``trio.run`` (no sockets, no simulation);
* h11 over simulated TCP: the same client, but through ``trio.open_tcp_stream`` inside
  ``kelpie_dst.run`` (latency, bandwidth, the simulated socket layer);
* httpx and httpx2 over simulated TCP: the real clients, keep-alive, unmodified.

Usage: ``python bench/bench_network.py [--requests 2000]``. Prints requests/s and each row's
cost relative to the baseline.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable

import h11
import httpx
import trio
import trio.testing

import kelpie_dst
from kelpie_dst.examples import http


async def h11_requests(stream: trio.abc.Stream, count: int) -> None:
    conn = h11.Connection(h11.CLIENT)
    for i in range(count):
        request = h11.Request(method="GET", target=f"/echo/{i}", headers=[("host", "web")])
        await stream.send_all(conn.send(request) + conn.send(h11.EndOfMessage()))
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.EndOfMessage):
                break
        conn.start_next_cycle()


def baseline(count: int) -> float:
    async def main() -> None:
        client, server = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(http.serve_http, server)
            await h11_requests(client, count)
            nursery.cancel_scope.cancel()

    start = time.perf_counter()
    trio.run(main)
    return time.perf_counter() - start


def simulated(body: Callable[[int], Awaitable[None]], count: int) -> float:
    async def main(sim: kelpie_dst.Simulation) -> None:
        sim.add_node("web", http.web_node)
        await trio.sleep(0.01)
        await body(count)

    start = time.perf_counter()
    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure
    return time.perf_counter() - start


async def via_h11(count: int) -> None:
    stream = await trio.open_tcp_stream("web", http.PORT)
    await h11_requests(stream, count)


async def via_httpx(count: int) -> None:
    async with httpx.AsyncClient(base_url=f"http://web:{http.PORT}") as client:
        for i in range(count):
            (await client.get(f"/echo/{i}")).raise_for_status()


async def via_httpx2(count: int) -> None:
    import httpx2

    async with httpx2.AsyncClient(base_url=f"http://web:{http.PORT}") as client:
        for i in range(count):
            (await client.get(f"/echo/{i}")).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    n = args.requests
    base = baseline(n)
    rows = [("h11, memory_stream_pair, bare trio (baseline)", base)]
    rows.append(("h11, simulated TCP", simulated(via_h11, n)))
    rows.append(("httpx, simulated TCP", simulated(via_httpx, n)))
    rows.append(("httpx2, simulated TCP", simulated(via_httpx2, n)))
    print(f"{n} sequential keep-alive requests each")
    print(f"{'client and transport':<48} {'requests/s':>11} {'vs baseline':>12}")
    for name, seconds in rows:
        print(f"{name:<48} {n / seconds:>11,.0f} {seconds / base:>11.2f}x")


if __name__ == "__main__":
    main()
