"""Requests/s of the Letta-compatible API itself, and how long ``kelpie serve`` takes to start.

Rows (bench_http.py prints them after its transport rows; this file also runs alone):

* loopback: ``create_app`` over an ``AgentService`` on a real SQLite file (``system_ports()``,
  ``synchronous=FULL``) served by ``kelpie_agent.http`` on 127.0.0.1, an httpx client with
  keep-alive in the same trio run (one process, one core): N ``POST /v1/agents/``, then N
  ``POST /v1/agents/{id}/messages`` to one agent;
* simulation: the same app and workload on a simulated node (SimKV, sim ports) and the
  client on another, over the simulated network (``kelpie_dst.run``, seed 1); wall-clock
  requests/s of a run in virtual time;
* the ``kelpie serve`` process: from ``exec`` to its ``listening on`` line, and the import of
  the API alone in a fresh interpreter, median of a few runs.

The model is the SimLLM's helpful policy with no latency (``LlmTiming.instant()``) in both
worlds, so the figures are the server's cost, not a model's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import httpx
import trio

import kelpie_dst
from kelpie_agent.api import create_app
from kelpie_agent.http import HttpServer, ServerOptions, serve
from kelpie_agent.ports import Ports, system_ports
from kelpie_agent.service import open_agent_node
from kelpie_agent.storage import KV, SqliteKV
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports

Row = tuple[str, int, float]  # name, requests, seconds


async def workload(client: httpx.AsyncClient, count: int) -> tuple[float, float]:
    """Seconds for ``count`` creates, then ``count`` sends to the first agent."""
    start = time.perf_counter()
    agents = []
    for i in range(count):
        response = await client.post("/v1/agents/", json={"name": f"a{i}"})
        response.raise_for_status()
        agents.append(response.json()["id"])
    created = time.perf_counter()
    for i in range(count):
        response = await client.post(f"/v1/agents/{agents[0]}/messages", json={"input": f"m{i}"})
        response.raise_for_status()
    return created - start, time.perf_counter() - created


async def serve_api(
    kv: KV,
    ports: Ports,
    node_id: str,
    port: int,
    task_status: trio.TaskStatus[HttpServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    llm = SimLlmClient(HelpfulPolicy(), timing=LlmTiming.instant())
    async with (
        open_agent_node(kv, ports, node_id=node_id, llm=llm) as service,
        trio.open_nursery() as nursery,
    ):
        app = create_app(service)
        server = await nursery.start(partial(serve, app, "0.0.0.0", port, ServerOptions()))
        task_status.started(server)
        await trio.sleep_forever()


def loopback(count: int) -> list[Row]:
    async def main() -> tuple[float, float]:
        with tempfile.TemporaryDirectory() as tmp:
            kv = await SqliteKV.open(Path(tmp) / "bench.db")
            async with trio.open_nursery() as nursery:
                server = await nursery.start(serve_api, kv, system_ports(), "bench", 0)
                url = f"http://127.0.0.1:{server.port}"
                async with httpx.AsyncClient(base_url=url) as client:
                    seconds = await workload(client, count)
                await server.shutdown(grace=1)
                nursery.cancel_scope.cancel()
            await kv.close()
        return seconds

    create, send = trio.run(main)
    return [
        ("loopback, SQLite: create agent", count, create),
        ("loopback, SQLite: send message", count, send),
    ]


def simulated(count: int) -> list[Row]:
    box: dict[str, float] = {}

    async def api_node(node: kelpie_dst.Node) -> None:
        await serve_api(open_kv(node), sim_ports(node), node.name, 8283)

    async def main(sim: kelpie_dst.Simulation) -> None:
        sim.add_node("api", api_node)
        await trio.sleep(0.1)
        async with httpx.AsyncClient(base_url="http://api:8283") as client:
            box["create"], box["send"] = await workload(client, count)

    result = kelpie_dst.run(main, seed=1)
    assert result.ok, result.failure
    return [
        ("simulation, SimKV: create agent", count, box["create"]),
        ("simulation, SimKV: send message", count, box["send"]),
    ]


def startup(runs: int) -> list[tuple[str, float]]:
    """Median seconds to the listening line of ``kelpie serve``, and to import the API."""
    kelpie = Path(sys.executable).with_name("kelpie")
    to_line, imports = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            began = time.perf_counter()
            proc = subprocess.Popen(
                [str(kelpie), "serve", "--port", "0", "--data-dir", tmp, "--llm", "sim"],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("kelpie: listening on"):
                    to_line.append(time.perf_counter() - began)
                    break
            proc.terminate()
            proc.communicate(timeout=30)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import kelpie_agent.api"], check=True)
        imports.append(time.perf_counter() - began)
    return [
        ("kelpie serve: exec to 'listening on' (SQLite, sim)", statistics.median(to_line)),
        ("python -c 'import kelpie_agent.api'", statistics.median(imports)),
    ]


def print_rows(rows: list[Row], starts: list[tuple[str, float]]) -> None:
    print(f"{'API row (one process, one core)':<58} {'requests/s':>11} {'ms/request':>11}")
    for name, count, seconds in rows:
        print(f"{name:<58} {count / seconds:>11,.0f} {seconds / count * 1e3:>11,.2f}")
    for name, seconds in starts:
        print(f"{name:<58} {seconds:>10.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--api-requests", type=int, default=300)
    parser.add_argument("--startup-runs", type=int, default=5)
    args = parser.parse_args()
    print_rows(
        loopback(args.api_requests) + simulated(args.api_requests), startup(args.startup_runs)
    )


if __name__ == "__main__":
    main()
