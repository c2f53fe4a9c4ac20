"""Tools: the registry (``/v1/tools/``) and one agent's tools (attach, detach, run)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from ._context import current_service
from ._models_agents import AgentState, agent_out
from ._models_tools import (
    Tool,
    ToolCreate,
    ToolRunRequest,
    ToolRunResponse,
    ToolUpdate,
    tool_out,
    tool_run_out,
)
from ._params import AgentId, Cursor, IdListQuery, NonBlankQuery, ToolId, ToolName
from ._routes_agents import MAX_PAGE, Deleted
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["tools_router"]

Limit = Annotated[int, Query(ge=0, le=MAX_PAGE)]
Order = Literal["asc", "desc"]


def _options(body: ToolCreate | ToolUpdate) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if body.description is not None:
        options["description"] = body.description
    if body.json_schema is not None:
        options["json_schema"] = body.json_schema
    if body.tags is not None:
        options["tags"] = tuple(body.tags)
    if body.return_char_limit is not None:
        options["return_char_limit"] = body.return_char_limit
    if isinstance(body, ToolUpdate) and body.metadata_ is not None:
        options["metadata"] = body.metadata_
    return options


def tools_router() -> APIRouter:
    router = APIRouter(tags=["tools"], responses=ERROR_RESPONSES)

    async def create_tool(body: ToolCreate) -> Tool:
        """A custom tool from Python source; the schema comes from the function's signature
        and Google-style docstring unless ``json_schema`` is given."""
        return tool_out(await current_service().create_tool(body.source_code, **_options(body)))

    async def upsert_tool(body: ToolCreate) -> Tool:
        """Create the tool, or replace the custom tool with the same function name."""
        return tool_out(await current_service().upsert_tool(body.source_code, **_options(body)))

    async def list_tools(
        name: NonBlankQuery = None,
        names: Annotated[list[str] | None, Query()] = None,
        tool_ids: IdListQuery = None,
        tool_types: Annotated[list[str] | None, Query()] = None,
        exclude_tool_types: Annotated[list[str] | None, Query()] = None,
        search: str | None = None,
        return_only_letta_tools: bool = False,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Order = "asc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[Tool]:
        """Built-in tools first, then the stored ones by name; cursors are tool ids. Letta's
        filters: ``name``/``names``, ``tool_ids``, ``tool_types``, ``exclude_tool_types``,
        ``search`` (part of the name, any case), ``return_only_letta_tools``."""
        tools = await current_service().list_tools(
            name=name,
            names=tuple(names or ()),
            tool_ids=tuple(tool_ids or ()),
            tool_types=tuple(tool_types or ()),
            exclude_tool_types=tuple(exclude_tool_types or ()),
            search=search,
            letta_only=return_only_letta_tools,
            after=after,
            before=before,
            limit=limit,
            order=order,
        )
        return [tool_out(t) for t in tools]

    collection_route(router, "/v1/tools/", create_tool, ["POST"], response_model=Tool)
    collection_route(router, "/v1/tools/", upsert_tool, ["PUT"], response_model=Tool)
    collection_route(router, "/v1/tools/", list_tools, ["GET"], response_model=list[Tool])

    @router.get("/v1/tools/{tool_id}")
    async def get_tool(tool_id: ToolId) -> Tool:
        return tool_out(await current_service().get_tool(tool_id))

    @router.patch("/v1/tools/{tool_id}")
    async def update_tool(tool_id: ToolId, body: ToolUpdate) -> Tool:
        changes = _options(body)
        if body.source_code is not None:
            changes["source_code"] = body.source_code
        if not changes:
            return tool_out(await current_service().get_tool(tool_id))
        return tool_out(await current_service().update_tool(tool_id, **changes))

    @router.delete("/v1/tools/{tool_id}")
    async def delete_tool(tool_id: ToolId) -> Deleted:
        await current_service().delete_tool(tool_id)
        return Deleted(message=f"Tool id={tool_id} successfully deleted")

    # -- an agent's tools ----------------------------------------------------------------------
    @router.get("/v1/agents/{agent_id}/tools")
    async def list_agent_tools(
        agent_id: AgentId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Order = "asc",
    ) -> list[Tool]:
        """The agent's tools in attachment order (``asc``)."""
        tools = await current_service().list_agent_tools(
            agent_id, after=after, before=before, limit=limit, order=order
        )
        return [tool_out(t) for t in tools]

    @router.patch("/v1/agents/{agent_id}/tools/attach/{tool_id}")
    async def attach_tool(agent_id: AgentId, tool_id: ToolId) -> AgentState:
        return agent_out(await current_service().attach_tool(agent_id, tool_id))

    @router.patch("/v1/agents/{agent_id}/tools/detach/{tool_id}")
    async def detach_tool(agent_id: AgentId, tool_id: ToolId) -> AgentState:
        return agent_out(await current_service().detach_tool(agent_id, tool_id))

    @router.post("/v1/agents/{agent_id}/tools/{tool_name}/run")
    async def run_tool(
        agent_id: AgentId, tool_name: ToolName, body: ToolRunRequest | None = None
    ) -> ToolRunResponse:
        """Run one of the agent's tools once with ``args`` (outside any run)."""
        args = body.args if body is not None else {}
        return tool_run_out(await current_service().run_tool(agent_id, tool_name, args))

    return router
