"""The service's operations on managed MCP servers (functions of an :class:`AgentService`):
create, update, delete, refresh; the tools of a server; running one outside any agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kelpie_agent.agent import ToolRunResult, ToolSpec, ToolStore
from kelpie_agent.errors import KelpieError

from ._errors import InvalidError, NotFoundError
from ._mcp_servers import McpServerRecord, managed, merge_secrets, refresh, server_tools

if TYPE_CHECKING:
    from ._service import AgentService

__all__ = [
    "create_server",
    "delete_server",
    "get_server",
    "list_servers",
    "refresh_server",
    "run_server_tool",
    "server_tool",
    "server_tool_list",
    "update_server",
]

_KIND_FIELDS = {
    "stdio": {"command", "args", "env"},
    "sse": {"server_url", "auth_header", "auth_token", "custom_headers"},
    "streamable_http": {"server_url", "auth_header", "auth_token", "custom_headers"},
}


async def create_server(
    service: AgentService, name: str, kind: str, fields: Mapping[str, Any]
) -> McpServerRecord:
    """Store the server, then register the tools it lists (if it can be reached now)."""
    service._check_running()
    mcp = managed(service)
    if mcp.is_static(name):
        raise InvalidError(
            "server_name", f"{name!r} is a statically configured mcp server", status=409
        )
    now = service.ports.clock.now()
    given: dict[str, Any] = {
        k: tuple(v) if k == "args" else v for k, v in fields.items() if v is not None
    }
    record = McpServerRecord(
        service.ports.ids.new("mcp_server"),
        name,
        kind,  # type: ignore[arg-type]
        created_at=now,
        updated_at=now,
        **given,
    )
    _check_config(record)
    saved = await mcp.store.save(record, new=True)
    await refresh(service, saved, strict=False)
    return saved


def _check_config(record: McpServerRecord) -> None:
    try:
        record.config()
    except KelpieError as error:
        if record.mcp_server_type != "sse":
            raise InvalidError("config", str(error)) from None


async def get_server(service: AgentService, server_id: str) -> McpServerRecord:
    service._check_running()
    return await managed(service).store.get(server_id)


async def list_servers(service: AgentService) -> list[McpServerRecord]:
    service._check_running()
    return await managed(service).store.all()


async def update_server(
    service: AgentService, server_id: str, name: str | None, changes: Mapping[str, Any]
) -> McpServerRecord:
    """Replace the given fields (masked secrets keep their stored values); a rename moves the
    server's tools with it."""
    mcp = managed(service)
    old = await get_server(service, server_id)
    wrong = sorted(set(changes) - _KIND_FIELDS[old.mcp_server_type])
    if wrong:
        raise InvalidError(
            f"config.{wrong[0]}", f"not a field of a {old.mcp_server_type} server", status=400
        )
    fields = dict(changes)
    for key in ("env", "custom_headers"):
        if fields.get(key) is not None:
            fields[key] = merge_secrets(getattr(old, key), fields[key])
    if fields.get("auth_token") == "****":
        fields["auth_token"] = old.auth_token
    if "args" in fields:
        fields["args"] = tuple(fields["args"] or ())
    if "command" in fields and fields["command"] is None:
        del fields["command"]
    new = attrs.evolve(
        old, **fields, server_name=name or old.server_name, updated_at=service.ports.clock.now()
    )
    _check_config(new)
    saved = await mcp.store.save(new, new=False)
    if saved.server_name != old.server_name:
        tools = ToolStore(service.kv, service.ports)
        for spec in server_tools(await tools.list(), old.server_name):
            meta = {**spec.metadata, "mcp_server": saved.server_name}
            await tools.save(
                attrs.evolve(
                    spec,
                    mcp_server=saved.server_name,
                    metadata=meta,
                    tags=(f"mcp:{saved.server_name}",),
                )
            )
        await mcp.client.remove_server(old.server_name)
    if saved.mcp_server_type != "sse":  # stored, never connected to (see _check_config)
        await mcp.sync(saved.server_name)
    return saved


async def delete_server(service: AgentService, server_id: str) -> None:
    """Delete the record (from then on its tools fail on every node), its tools, and this
    node's connection to it."""
    mcp = managed(service)
    service._check_running()
    gone = await mcp.store.delete(server_id)
    tools = ToolStore(service.kv, service.ports)
    for spec in server_tools(await tools.list(), gone.server_name):
        await tools.delete(spec.id)
    await mcp.client.remove_server(gone.server_name)


async def refresh_server(service: AgentService, server_id: str) -> dict[str, list[str]]:
    return await refresh(service, await get_server(service, server_id))


async def server_tool_list(service: AgentService, server_id: str) -> list[ToolSpec]:
    record = await get_server(service, server_id)
    tools = await ToolStore(service.kv, service.ports).list()
    return server_tools(tools, record.server_name)


async def server_tool(service: AgentService, server_id: str, tool_id: str) -> ToolSpec:
    found = [t for t in await server_tool_list(service, server_id) if t.id == tool_id]
    if not found:
        raise NotFoundError("tool", tool_id)
    return found[0]


async def run_server_tool(
    service: AgentService, server_id: str, tool_id: str, args: Mapping[str, Any]
) -> ToolRunResult:
    """Call the tool once; every failure (unreachable server, bad arguments, the tool's own
    error) is an ``error`` result, as an agent would see it."""
    spec = await server_tool(service, server_id, tool_id)
    mcp = managed(service)
    name = str(spec.metadata.get("mcp_tool", spec.name))
    try:
        result = await mcp.call_tool(str(spec.mcp_server), name, dict(args))
    except KelpieError as error:
        return ToolRunResult("error", f"{type(error).__name__}: {error}")
    return ToolRunResult("error" if result.is_error else "success", result.text)
