"""Reading one agent's state from storage for its agent file (``agents.export_file``).

A plain read of committed state (the agent core commits every change before applying it), so
exporting never activates the agent or moves it between nodes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from kelpie_agent.storage import KV

from ._agent_file import dump_agent_file
from ._agent_files import FileState, state_prefix
from ._builtins import builtin_by_id
from ._codec import Keys, unpack
from ._errors import AgentNotFoundError
from ._folders import file_text, folder_files, load_folder
from ._models import AgentRecord, Block, ToolSpec

__all__ = ["export_agent"]

Read = Callable[[Callable[[], Awaitable[Any]], str], Awaitable[Any]]


async def export_agent(
    kv: KV, read: Read, agent_id: str, *, now: float, scrub_messages: bool = False
) -> dict[str, Any]:
    """The agent file (a JSON-ready dict) of ``agent_id``; ``read(op, what)`` retries reads."""
    keys = Keys(agent_id)
    raw = await read(lambda: kv.get(keys.agent), f"agent {agent_id}")
    if raw is None:
        raise AgentNotFoundError(agent_id)
    agent: AgentRecord = unpack(raw)
    blocks: list[Block] = []
    for block_id in agent.block_ids:
        data = await read(partial(kv.get, Keys.block(block_id)), f"block {block_id}")
        if data is not None:
            blocks.append(unpack(data))
    tools: list[ToolSpec] = []
    for tool_id in agent.tool_ids:
        builtin = builtin_by_id(tool_id)
        if builtin is not None:
            tools.append(builtin.spec())
            continue
        data = await read(partial(kv.get, Keys.tool(tool_id)), f"tool {tool_id}")
        if data is not None:
            tools.append(unpack(data))
    messages = []
    if not scrub_messages:
        rows = await read(lambda: kv.scan_prefix(keys.messages), "the agent's messages")
        messages = [unpack(value) for _, value in rows]
    folders = []
    files: list[tuple[Any, str]] = []
    for folder_id in agent.folder_ids:
        folder = await read(partial(load_folder, kv, folder_id), f"folder {folder_id}")
        if folder is None:
            continue
        folders.append(folder)
        for record in await read(partial(folder_files, kv, folder_id), "files"):
            text = await read(partial(file_text, kv, record), f"file {record.id}")
            files.append((record, text))
    rows = await read(lambda: kv.scan_prefix(state_prefix(agent_id)), "the agent's files")
    states: list[FileState] = [unpack(value) for _, value in rows]
    return dump_agent_file(
        agent,
        blocks,
        tools,
        messages,
        folders,
        files,
        [s for s in states if s.is_open],
        now=now,
    )
