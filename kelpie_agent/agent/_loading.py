"""Loading an agent's parts from storage: its record, blocks, tools, and the view of it.

One set of loaders, used by the actor when it (re)loads its state and by readers outside any
actor (the service answers ``get_agent`` and the other pure reads from storage, so reads never
move an actor between nodes). The agent core commits every change before it applies it in
memory, so a view built from storage is the one the actor would answer.
"""

from __future__ import annotations

from ._builtins import builtin_by_id
from ._codec import Keys, unpack
from ._folders import folder_key
from ._models import AgentRecord, Block, ToolSpec
from ._requests import AgentView
from ._retry import Reader
from ._toolset import ToolSet

__all__ = ["load_agent", "load_blocks", "load_tool_specs", "load_tools", "load_view"]


async def load_agent(read: Reader, agent_id: str) -> AgentRecord | None:
    data = await read.get(Keys(agent_id).agent, f"agent {agent_id}")
    agent: AgentRecord | None = unpack(data) if data is not None else None
    return agent


async def load_blocks(read: Reader, agent: AgentRecord) -> tuple[Block, ...]:
    """The agent's blocks that exist, in attachment order."""
    blocks: list[Block] = []
    for block_id in agent.block_ids:
        data = await read.get(Keys.block(block_id), f"block {block_id}")
        if data is not None:
            blocks.append(unpack(data))
    return tuple(blocks)


async def load_tool_specs(read: Reader, agent: AgentRecord) -> list[ToolSpec]:
    """The specs of the agent's attached tools that exist (built-ins are not stored)."""
    specs: list[ToolSpec] = []
    for tool_id in agent.tool_ids:
        builtin = builtin_by_id(tool_id)
        if builtin is not None:
            specs.append(builtin.spec())
            continue
        data = await read.get(Keys.tool(tool_id), f"tool {tool_id}")
        if data is not None:
            specs.append(unpack(data))
    return specs


async def load_tools(read: Reader, agent: AgentRecord) -> ToolSet:
    """The agent's tools as a run uses them (attachment order, usable ones only)."""
    return ToolSet(agent, await load_tool_specs(read, agent))


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
    recent = await read.scan(keys.messages, end, "history", limit=window, reverse=True)
    ids = tuple(unpack(value).id for _, value in reversed(recent))
    specs = tuple(t.spec for t in tools.tools.values())
    folders = []
    for folder_id in agent.folder_ids:  # none read for an agent without folders
        data = await read.get(folder_key(folder_id), f"folder {folder_id}")
        if data is not None:
            folders.append(unpack(data))
    return AgentView(agent, blocks, specs, stop, ids, tuple(folders))
