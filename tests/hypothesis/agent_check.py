"""The agent server machine's full check: read everything back and compare it with the model.

Run after every step that leaves the network healed (tests/hypothesis/agent_machine.py). Reads
go through the driver, like any client's, to the servers that are up, in turn; a healed system
must answer each within ``LIVENESS`` seconds (liveness after healing). What is checked:

* the agents listed (every page): every acknowledged agent, no deleted one, and nothing else
  but agents whose create got no answer (recognised by their unique names, and adopted);
  each with exactly the blocks ``persona`` and ``human``, each holding a value its
  :class:`~kelpie_dst.hypothesis.Register` allows;
* each agent's user messages, by otid: acknowledged ones exactly once, unknown ones at most
  once, no other;
* each agent's archival passages, likewise by text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import trio

import kelpie_dst
from kelpie_dst.hypothesis import Outcome

from .agent_drivers import Driver, Reply
from .agent_model import AgentModel, Model

T = TypeVar("T")
LIVENESS = 120.0  # seconds a healed system may take to answer a read


async def read_back(
    sim: kelpie_dst.Simulation, servers: tuple[str, ...], driver: Driver, model: Model
) -> None:
    """Read the whole state through ``driver`` and check it against ``model`` (narrowing what
    the model allows to what was seen)."""

    async def read(
        request: Callable[[str], Awaitable[Reply[T]]], what: str, agent: AgentModel | None = None
    ) -> T | None:
        """Through the servers that are up, in turn, until one answers (None: the agent is
        gone)."""
        deadline = trio.current_time() + LIVENESS
        attempt = 0
        while True:
            up = [name for name in servers if sim.node(name).alive] or list(servers)
            reply = await request(up[attempt % len(up)])
            if reply.outcome is Outcome.OK:
                return reply.get()
            if agent is not None and reply.status == 404:
                model.answered(agent, reply, what)  # fails unless the agent may be deleted
                return None
            assert reply.status not in (400, 404, 409, 422), f"{what}: {reply}"
            assert trio.current_time() < deadline, f"liveness: {what} failed for {LIVENESS}s"
            attempt += 1
            await trio.sleep(1.0)

    listing = await read(driver.list_agents, "list agents")
    assert listing is not None
    for agent in model.listed(listing):  # also checks every agent's blocks
        agent_id = agent.agent_id
        otids = await read(partial(driver.user_otids, agent_id=agent_id), "messages", agent)
        texts = await read(partial(driver.passages, agent_id=agent_id), "passages", agent)
        if otids is None or texts is None:
            continue  # its delete landed
        agent.messages.observe_all(otids, f"{agent_id} user messages")
        agent.passages.observe_all(texts, f"{agent_id} passages")
