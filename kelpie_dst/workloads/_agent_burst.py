"""A burst of agent creates at one instant (``create_burst``, with ``list_walks``).

The agent workload's clients create their agents one after another, on nodes whose clocks are
skewed by up to two seconds, so no two agents were ever created within the same millisecond.
Real clients do create agents in bursts (an onboarding script, a test fixture, a fan-out), and
the agents list's order must hold there too: ``agents.list`` sorts by the ``created_at`` it
reports, then by id, both ways, and every page walk agrees (``lists_page_exactly``). An index
keyed at a coarser clock than the one the list reports, or a tie broken another way, shows only
when creation times are that close.

So at the end of the run, before the lists are walked, ``count`` agents are created at once,
all through one node, each a minimal agent named ``burst-K``. A create whose answer was lost is
retried like every workload request, looking its name up first, so each acknowledged create
has exactly one agent and its id is known. The created ids join the agents list's must-list;
an agent whose create was refused for good may still exist, so the names looked up at the end
join the may-list.
"""

from __future__ import annotations

from typing import Any

import trio

__all__ = ["create_burst"]


async def create_burst(clients: Any, count: int, rng: Any) -> tuple[list[str], list[str]]:
    """Create ``count`` agents concurrently through one node; returns (the ids of the
    acknowledged creates, the ids of every burst agent found by name afterwards)."""
    node = rng.choice(clients.world.node_names)
    acked: dict[int, str] = {}

    async def one(k: int) -> None:
        name = f"burst-{k}"

        async def attempt(at: str, number: int) -> str:
            sdk = clients.link.sdk(at)
            if number > 1:  # the first attempt may have created it
                page = await sdk.agents.list(name=name, order="asc", limit=1)
                if page.items:
                    return str(page.items[0].id)
            made = await sdk.agents.create(
                name=name,
                memory_blocks=[{"label": "persona", "value": f"burst agent {k}", "limit": 200}],
                include_base_tools=False,
            )
            return str(made.id)

        try:
            acked[k] = await clients._call(f"burst{k} create", "", attempt, rng, {"node": node})
        except Exception:  # refused for good: recorded by _call, and the agent may exist
            pass

    async with trio.open_nursery() as nursery:
        for k in range(count):
            nursery.start_soon(one, k)
    found: list[str] = []
    for k in range(count):

        async def look(at: str, _: int, name: str = f"burst-{k}") -> list[str]:
            page = await clients.link.sdk(at).agents.list(name=name, order="asc", limit=10)
            return [str(a.id) for a in page.items]

        found += await clients._call(f"burst{k} lookup", "", look, rng, {"node": node})
    return [acked[k] for k in sorted(acked)], found
