"""Reading committed state straight from the KV, without activating any actor.

The agent core commits every change before it applies it in memory, so the KV is never behind
an actor: a view built from it is the one the actor would answer (``tests/service`` checks that
they are equal). The service answers ``get_agent``, ``list_agents`` and the other pure reads
of agent state from here, so reads never move an actor between nodes.
"""

from __future__ import annotations

import random  # determinism-ok: only the type of the Rng port
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from kelpie_agent.agent import AgentRecord, AgentView, Block, Keys, ToolSpec
from kelpie_agent.agent._builtins import builtin_by_id
from kelpie_agent.agent._codec import unpack
from kelpie_agent.agent._toolset import ToolSet
from kelpie_agent.storage import KV, StorageError

from ._errors import UnavailableError, translate

__all__ = ["Reader", "load_agent", "load_tools", "load_view"]

T = TypeVar("T")


class Reader:
    """KV reads retried on storage errors; then :class:`UnavailableError`."""

    def __init__(self, kv: KV, rng: random.Random, attempts: int, backoff: float) -> None:
        self.kv = kv
        self.rng = rng
        self.attempts = attempts
        self.backoff = backoff

    async def __call__(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        for attempt in range(self.attempts):
            try:
                return await op()
            except StorageError as error:
                if attempt + 1 == self.attempts:
                    raise UnavailableError(
                        f"storage unavailable: reading {what} failed {self.attempts} times: {error}"
                    ) from error
            except ConnectionError as error:
                mapped = translate(error)
                assert mapped is not None
                raise mapped from error
            delay = self.backoff * (2 ** min(attempt, 6))
            await trio.sleep(delay * (0.5 + 0.5 * self.rng.random()))
        raise AssertionError("unreachable")

    async def get(self, key: bytes, what: str) -> bytes | None:
        return await self(lambda: self.kv.get(key), what)

    async def scan(
        self, start: bytes, end: bytes | None, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        return await self(
            lambda: self.kv.scan(start, end, limit=limit, reverse=reverse), f"keys from {start!r}"
        )


async def load_agent(read: Reader, agent_id: str) -> AgentRecord | None:
    data = await read.get(Keys(agent_id).agent, f"agent {agent_id}")
    agent: AgentRecord | None = unpack(data) if data is not None else None
    return agent


async def load_tools(read: Reader, agent: AgentRecord) -> tuple[ToolSpec, ...]:
    """The agent's tools as its actor lists them (attachment order, usable ones only)."""
    specs: list[ToolSpec] = []
    for tool_id in agent.tool_ids:
        builtin = builtin_by_id(tool_id)
        if builtin is not None:
            specs.append(builtin.spec())
            continue
        data = await read.get(Keys.tool(tool_id), f"tool {tool_id}")
        if data is not None:
            specs.append(unpack(data))
    return tuple(t.spec for t in ToolSet(agent, specs).tools.values())


async def load_blocks(read: Reader, agent: AgentRecord) -> tuple[Block, ...]:
    blocks: list[Block] = []
    for block_id in agent.block_ids:
        data = await read.get(Keys.block(block_id), f"block {block_id}")
        if data is not None:
            blocks.append(unpack(data))
    return tuple(blocks)


async def load_view(read: Reader, agent_id: str, window: int) -> AgentView | None:
    """The agent as ``GetAgent`` shows it, or None if there is no such agent."""
    agent = await load_agent(read, agent_id)
    if agent is None:
        return None
    keys = Keys(agent_id)
    blocks = await load_blocks(read, agent)
    tools = await load_tools(read, agent)
    raw = await read.get(keys.session, f"the session of {agent_id}")
    stop = unpack(raw).stop_reason if raw is not None else None
    end = Keys.prefix_end(keys.messages)
    recent = await read.scan(keys.messages, end, limit=window, reverse=True)
    ids = tuple(unpack(value).id for _, value in reversed(recent))
    return AgentView(agent, blocks, tools, stop, ids)
