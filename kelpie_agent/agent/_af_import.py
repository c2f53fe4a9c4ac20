"""Importing an agent file: tools, blocks, folders and files first, then the agent itself.

Tools are matched by name, as Letta does: built-ins map to Kelpie's built-ins, an existing
custom tool of the same name is kept (its source replaced with the file's when
``override_existing_tools``), a missing one is created from its source; MCP tools are
registered for their server. Blocks are created anew. Each source becomes a new folder (its
name made unique) whose files are uploaded from their text and processed in the background.
Then the agent is created (through ``create``, so its actor writes it) with its history, and
its folders are attached, the files attaching opened are closed (those processed by then), and
the file's open files are opened again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ._af_messages import ImportedMessage
from ._agent_file import AgentFilePlan, ToolDef
from ._builtins import builtin_by_name
from ._errors import InvalidRequestError
from ._folders import FolderStore, unique_name
from ._requests import AgentView, AttachFolder, CloseFile, CreateAgent, OpenFile
from ._stores import BlockStore, ToolStore

__all__ = ["import_agent_file"]


async def _tool(tools: ToolStore, tool: ToolDef, override: bool) -> str:
    builtin = builtin_by_name(tool.name) if tool.tool_type != "custom" else None
    if builtin is not None:
        return builtin.spec().id
    existing = await tools.by_name(tool.name)
    if tool.tool_type == "external_mcp":
        if existing is not None:
            return existing.id
        params = (tool.json_schema or {}).get("parameters") or {"type": "object", "properties": {}}
        spec = await tools.add_mcp_tool(
            tool.mcp_server or "unknown", tool.name, tool.description, params
        )
        return spec.id
    if existing is not None and not (override and tool.source_code):
        return existing.id
    if not tool.source_code:
        raise InvalidRequestError(
            f"tools: {tool.name!r} has no source code and no tool of that name exists"
        )
    options: dict[str, Any] = {
        "description": tool.description or None,
        "json_schema": tool.json_schema,
        "tags": tool.tags,
        "default_requires_approval": tool.default_requires_approval,
    }
    if tool.return_char_limit:
        options["return_char_limit"] = tool.return_char_limit
    if tool.metadata:  # Letta's metadata_, kept with the tool it describes
        options["metadata"] = dict(tool.metadata)
    made = await (tools.upsert if existing is not None else tools.create)(
        tool.source_code, **options
    )
    return made.id


async def import_agent_file(
    plan: AgentFilePlan,
    *,
    tools: ToolStore,
    blocks: BlockStore,
    folders: FolderStore,
    create: Callable[[CreateAgent], Awaitable[AgentView]],
    request: Callable[[str, object], Awaitable[Any]],
    name: str | None = None,
    append_copy_suffix: bool = True,
    override_existing_tools: bool = True,
    strip_messages: bool = False,
    model: str | None = None,
    uploaded: Callable[[str], None] = lambda file_id: None,
) -> list[str]:
    """Import every agent of ``plan``; returns the new agent ids. ``request(agent_id, msg)``
    sends a message to an agent's actor; ``uploaded(file_id)`` is told of each file stored
    (``pending``), to process it as any upload is."""
    tool_ids = {
        ref: await _tool(tools, t, override_existing_tools) for ref, t in plan.tools.items()
    }
    block_ids: dict[str, str] = {}
    for ref, block in plan.blocks.items():
        made = await blocks.create(
            block.label,
            block.value,
            limit=block.limit,
            description=block.description,
            read_only=block.read_only,
            metadata=block.metadata,
        )
        block_ids[ref] = made.id
    folder_ids: dict[str, str] = {}
    taken = {f.name for f in await folders.all()}
    for ref, folder in plan.folders.items():
        unique = unique_name(folder.name, taken)
        taken.add(unique)
        made_folder = await folders.create(
            unique,
            description=folder.description,
            instructions=folder.instructions,
            metadata=folder.metadata,
        )
        folder_ids[ref] = made_folder.id
    file_ids: dict[str, str] = {}
    for ref, file in plan.files.items():
        stored = await folders.upload(
            folder_ids[file.folder_ref],
            file.file_name,
            file.content.encode("utf-8"),
            declared_type=file.file_type,
        )
        if stored is not None:
            file_ids[ref] = stored.id
            uploaded(stored.id)
    created: list[str] = []
    for planned in plan.agents:
        settings = dict(planned.settings)
        if name is not None:
            settings["name"] = name
        elif append_copy_suffix:
            settings["name"] = f"{settings['name']}_copy"
        if model is not None:
            settings["model"] = model
        history: tuple[ImportedMessage, ...] = () if strip_messages else planned.messages
        view = await create(
            CreateAgent(
                **settings,
                block_ids=tuple(block_ids[r] for r in planned.block_refs),
                tool_ids=tuple(dict.fromkeys(tool_ids[r] for r in planned.tool_refs)),
                imported=history,
            )
        )
        agent_id = view.agent.id
        for ref in planned.folder_refs:
            await request(agent_id, AttachFolder(folder_ids[ref]))
        if planned.folder_refs:  # attaching opened the files processed by then: the file
            await request(agent_id, CloseFile(None))  # says which are open (DreqK-1)
        for ref, start, end in planned.open_files:
            if ref in file_ids:
                await request(agent_id, OpenFile(file_ids[ref], start, end))
        created.append(agent_id)
    return created
