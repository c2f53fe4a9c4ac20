"""Requests/s of kelpie_agent's HTTP server, against a bare h11 echo server as the baseline.

Rows (client and server share one process and one core, as trio runs one thread):

* loopback, keep-alive: an h11 client sends sequential GETs on one connection to
  - the bare h11 echo server of ``kelpie_dst.examples.http`` (no ASGI, no limits: the floor),
  - ``kelpie_agent.http`` serving a hand-written ASGI app,
  - ``kelpie_agent.http`` serving a FastAPI app (JSON route);
* loopback, a new connection per request: the same three servers;
* loopback, httpx as the client (keep-alive), against the ASGI app: what a Python client adds;
* the simulated network (``kelpie_dst.run``): the baseline and our server with the ASGI and
  FastAPI apps, h11 client, keep-alive. Virtual time; the figure is wall-clock requests/s;
* then the Letta-compatible API's own rows from ``bench_http_api.py``: create-agent and
  send-message requests/s on loopback (SQLite) and in the simulation (SimKV), and the
  startup time of a ``kelpie serve`` process.

Usage: ``python bench/bench_http.py [--requests 2000] [--api-requests 300] [--startup-runs 5]``.
No uvicorn/hypercorn: the comparison point is the bare h11 server.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import bench_http_api  # this directory is on sys.path when the file runs as a script
import h11
import httpx
import trio
from fastapi import FastAPI

import kelpie_dst
from kelpie_agent.http import HttpServer, ServerOptions, serve
from kelpie_dst.examples import http as bare

Opener = Callable[[], Awaitable[trio.abc.Stream]]
BODY = b'{"hello": "world"}'


async def asgi_app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    headers = [(b"content-type", b"application/json"), (b"content-length", b"18")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


def fastapi_app() -> FastAPI:
    app = FastAPI()

    @app.get("/echo/{text}")
    async def echo(text: str) -> dict[str, str]:
        return {"hello": text}

    return app


async def one_request(conn: h11.Connection, stream: trio.abc.Stream, i: int) -> None:
    request = h11.Request(method="GET", target=f"/echo/{i}", headers=[("host", "web")])
    await stream.send_all(conn.send(request) + conn.send(h11.EndOfMessage()))
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            assert event.status_code == 200, event
        elif isinstance(event, h11.EndOfMessage):
            return


async def keep_alive(open_stream: Opener, count: int) -> None:
    stream = await open_stream()
    conn = h11.Connection(h11.CLIENT)
    async with stream:
        for i in range(count):
            await one_request(conn, stream, i)
            conn.start_next_cycle()


async def new_connections(open_stream: Opener, count: int) -> None:
    for i in range(count):
        stream = await open_stream()
        async with stream:
            await one_request(h11.Connection(h11.CLIENT), stream, i)


async def with_httpx(url: str, count: int) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        for i in range(count):
            (await client.get(f"/echo/{i}")).raise_for_status()


async def start_server(
    nursery: trio.Nursery, kind: str, port: int
) -> Callable[[], Awaitable[None]]:
    """Start ``kind`` on ``port`` (0: any); return an async stop function (and set the port)."""
    if kind == "bare":
        listeners = await nursery.start(partial(trio.serve_tcp, bare._quiet(bare.serve_http), port))
        PORTS[kind] = listeners[0].socket.getsockname()[1]

        async def stop_bare() -> None:
            nursery.cancel_scope.cancel()

        return stop_bare
    app = asgi_app if kind == "asgi" else fastapi_app()
    options = ServerOptions(lifespan="off")
    server: HttpServer = await nursery.start(partial(serve, app, "0.0.0.0", port, options))
    PORTS[kind] = server.port

    async def stop() -> None:
        await server.shutdown(grace=1)

    return stop


PORTS: dict[str, int] = {}


def loopback(kind: str, body: Callable[[Opener, int], Awaitable[None]], count: int) -> float:
    async def main() -> float:
        async with trio.open_nursery() as nursery:
            stop = await start_server(nursery, kind, 0)
            port = PORTS[kind]
            start = time.perf_counter()
            await body(partial(trio.open_tcp_stream, "127.0.0.1", port), count)
            elapsed = time.perf_counter() - start
            await stop()
        return elapsed

    return trio.run(main)


def loopback_httpx(count: int) -> float:
    async def main() -> float:
        async with trio.open_nursery() as nursery:
            stop = await start_server(nursery, "asgi", 0)
            start = time.perf_counter()
            await with_httpx(f"http://127.0.0.1:{PORTS['asgi']}", count)
            elapsed = time.perf_counter() - start
            await stop()
        return elapsed

    return trio.run(main)


def simulated(kind: str, count: int) -> float:
    async def server_node(node: kelpie_dst.Node) -> None:
        async with trio.open_nursery() as nursery:
            await start_server(nursery, kind, 8080)
            await trio.sleep_forever()

    async def main(sim: kelpie_dst.Simulation) -> None:
        sim.add_node("web", server_node)
        await trio.sleep(0.01)
        await keep_alive(partial(trio.open_tcp_stream, "web", 8080), count)

    fastapi_app()  # import FastAPI's lazy modules before the run
    start = time.perf_counter()
    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--api-requests", type=int, default=300)
    parser.add_argument("--startup-runs", type=int, default=5)
    args = parser.parse_args()
    n = args.requests
    rows: list[tuple[str, float]] = []
    names = {
        "bare": "bare h11 echo (baseline)",
        "asgi": "kelpie http + ASGI app",
        "fastapi": "kelpie http + FastAPI",
    }
    for kind in ("bare", "asgi", "fastapi"):
        rows.append((f"loopback keep-alive, {names[kind]}", loopback(kind, keep_alive, n)))
    for kind in ("bare", "asgi", "fastapi"):
        rows.append((f"loopback new conn, {names[kind]}", loopback(kind, new_connections, n // 4)))
    rows.append(("loopback keep-alive, httpx client -> ASGI app", loopback_httpx(n)))
    for kind in ("bare", "asgi", "fastapi"):
        rows.append((f"simulated keep-alive, {names[kind]}", simulated(kind, n)))
    counts = {name: (n // 4 if "new conn" in name else n) for name, _ in rows}
    print(f"sequential requests; client and server in one process (one core); n={n}")
    print(f"{'row':<58} {'requests/s':>11} {'µs/request':>11}")
    for name, seconds in rows:
        count = counts[name]
        print(f"{name:<58} {count / seconds:>11,.0f} {seconds / count * 1e6:>11,.0f}")
    print()
    api_rows = bench_http_api.loopback(args.api_requests)
    api_rows += bench_http_api.simulated(args.api_requests)
    bench_http_api.print_rows(api_rows, bench_http_api.startup(args.startup_runs))


if __name__ == "__main__":
    main()
