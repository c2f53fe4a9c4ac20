"""The client loop shared by the KV workloads (``kv``, ``kv_skew``, ``kv_ranges``).

Client ``n`` lives on node ``nodes[n % len(nodes)]``. Every boot of a node starts its clients
that still have operations left (``remaining[n] > 0``), so a restarted node resumes them; the
run waits until every client has used up its operations. Completion is checked by the node,
not by the clients: a client whose node crashed during its last operation never gets there,
and the restarted node starts no client for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

from .._nodes import Node
from .._sim import Simulation

__all__ = ["run_clients"]


async def run_clients(
    sim: Simulation,
    nodes: Sequence[str],
    remaining: dict[int, int],
    client: Callable[[Node, int], Awaitable[None]],
) -> None:
    """Add ``nodes`` to ``sim``, run ``client(node, n)`` for each client with operations left
    on each boot of its node, and return once ``remaining`` is all zero."""
    finished = trio.Event()

    async def node_main(node: Node) -> None:
        async with trio.open_nursery() as nursery:
            for number in range(len(remaining)):
                if nodes[number % len(nodes)] == node.name and remaining[number] > 0:
                    nursery.start_soon(client, node, number)
        if all(left == 0 for left in remaining.values()):
            finished.set()

    for name in nodes:
        sim.add_node(name, node_main)
    if any(remaining.values()):
        await finished.wait()
