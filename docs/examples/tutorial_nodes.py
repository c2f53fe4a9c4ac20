"""A counter server on its own simulated node, crashed and restarted by the process nemesis.

``main`` is the workload. It runs on the simulator's ``main`` node (which never crashes), starts
the server on a node called ``counter``, and sends it 30 increments, each with a request id so
that a retry after a timeout is not counted twice. The server keeps the applied ids in
``node.volatile`` (memory, wiped by a crash): that is the bug. ``main_fixed`` runs the same
workload against a server that keeps them in ``node.durable`` (its disk). See docs/tutorial.md.

    kelpie-dst run --entry tutorial_nodes:main --seed 1 --fault process.crash=0.2
    kelpie-dst run --entry tutorial_nodes:main_fixed --seed 1 --fault process.crash=0.2
"""

from __future__ import annotations

import math
from typing import Any

import trio

import kelpie_dst

Request = tuple[str, trio.MemorySendChannel[int]]


class CounterServer:
    def __init__(self) -> None:
        self.send, self._receive = trio.open_memory_channel[Request](math.inf)

    async def serve(self, node: kelpie_dst.Node) -> None:
        await self._serve(node, node.volatile)  # BUG: memory does not survive a crash

    async def serve_durable(self, node: kelpie_dst.Node) -> None:
        await self._serve(node, node.durable)  # the node's disk: kept across restarts

    async def _serve(self, node: kelpie_dst.Node, store: dict[str, Any]) -> None:
        applied: set[str] = store.setdefault("applied", set())
        kelpie_dst.log("counter up", incarnation=node.incarnation, count=len(applied))
        async for request_id, reply in self._receive:
            await trio.sleep(0.01)  # processing time
            applied.add(request_id)
            reply.send_nowait(len(applied))


async def call(server: CounterServer, request_id: str) -> int:
    """Send one request; on a 0.5 s timeout, send it again (same id) until answered."""
    while True:
        reply_send, reply_receive = trio.open_memory_channel[int](1)
        server.send.send_nowait((request_id, reply_send))
        with trio.move_on_after(0.5):
            return await reply_receive.receive()
        kelpie_dst.log("retry", request=request_id)


async def workload(sim: kelpie_dst.Simulation, durable: bool) -> None:
    server = CounterServer()
    sim.add_node("counter", server.serve_durable if durable else server.serve)
    for i in range(30):
        await call(server, f"inc-{i}")
        await trio.sleep(0.2)
    count = await call(server, "inc-29")  # a duplicate: the count must not change
    assert count == 30, f"counter lost increments: {count} != 30"


async def main(sim: kelpie_dst.Simulation) -> None:
    await workload(sim, durable=False)


async def main_fixed(sim: kelpie_dst.Simulation) -> None:
    await workload(sim, durable=True)
