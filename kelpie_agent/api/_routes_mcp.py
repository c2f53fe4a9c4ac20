"""MCP servers (``/v1/mcp-servers/``, Letta's ``mcp_servers``): managed at run time, stored in
the KV, their tools registered as ``external_mcp`` tools that agents attach like any other."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import Field

from kelpie_agent.agent._models import ID_PATTERN
from kelpie_agent.service import _mcp_catalog as catalog

from ._context import current_service
from ._models_common import RequestModel
from ._models_mcp import McpServer, McpServerCreate, McpServerUpdate, server_out
from ._models_tools import Tool, ToolRunResponse, tool_out, tool_run_out
from ._params import ToolId
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["mcp_router"]

ServerId = Annotated[str, Path(pattern=ID_PATTERN, description="An MCP server id (mcp_server-...)")]


class ToolRunArgs(RequestModel):
    args: dict[str, Any] = Field(default_factory=dict)


def mcp_router() -> APIRouter:
    router = APIRouter(tags=["mcp_servers"], responses=ERROR_RESPONSES)

    async def create_server(body: McpServerCreate) -> McpServer:
        """Store the server and register the tools it lists now."""
        config = body.config.model_dump(exclude={"mcp_server_type"})
        kind = body.config.mcp_server_type
        record = await catalog.create_server(current_service(), body.server_name, kind, config)
        return server_out(record)

    async def list_servers() -> list[McpServer]:
        return [server_out(r) for r in await catalog.list_servers(current_service())]

    collection_route(router, "/v1/mcp-servers/", create_server, ["POST"], response_model=McpServer)
    collection_route(
        router, "/v1/mcp-servers/", list_servers, ["GET"], response_model=list[McpServer]
    )

    @router.get("/v1/mcp-servers/{mcp_server_id}")
    async def get_server(mcp_server_id: ServerId) -> McpServer:
        return server_out(await catalog.get_server(current_service(), mcp_server_id))

    @router.patch("/v1/mcp-servers/{mcp_server_id}")
    async def update_server(mcp_server_id: ServerId, body: McpServerUpdate) -> McpServer:
        """Replace the fields given; masked secrets (``****``) keep their stored values."""
        record = await catalog.update_server(
            current_service(), mcp_server_id, body.server_name, body.config.changes()
        )
        return server_out(record)

    @router.delete("/v1/mcp-servers/{mcp_server_id}", status_code=204, response_model=None)
    async def delete_server(mcp_server_id: ServerId) -> None:
        """Delete the server and its tools; calls to them end with a tool error."""
        await catalog.delete_server(current_service(), mcp_server_id)

    @router.patch("/v1/mcp-servers/{mcp_server_id}/refresh")
    async def refresh_server(mcp_server_id: ServerId) -> dict[str, list[str]]:
        """List the server's tools again: add new ones, update changed ones in place (agents
        keep them), delete vanished ones. Returns the names per change. (Letta's
        ``agent_id`` is not declared, so it is refused: the refresh is for every agent.)"""
        return await catalog.refresh_server(current_service(), mcp_server_id)

    @router.get("/v1/mcp-servers/{mcp_server_id}/tools")
    async def list_tools(mcp_server_id: ServerId) -> list[Tool]:
        return [
            tool_out(t) for t in await catalog.server_tool_list(current_service(), mcp_server_id)
        ]

    @router.get("/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}")
    async def get_tool(mcp_server_id: ServerId, tool_id: ToolId) -> Tool:
        return tool_out(await catalog.server_tool(current_service(), mcp_server_id, tool_id))

    @router.post("/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}/run")
    async def run_tool(
        mcp_server_id: ServerId, tool_id: ToolId, body: ToolRunArgs
    ) -> ToolRunResponse:
        """Call the tool once; any failure is an ``error`` result."""
        result = await catalog.run_server_tool(current_service(), mcp_server_id, tool_id, body.args)
        return tool_run_out(result)

    return router
