"""``/v1/agents/``: create, list, get, update, delete."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from kelpie_agent.agent import BlockCreate as BlockCreateRecord
from kelpie_agent.agent import CreateAgent

from ._context import current_service
from ._models_agents import AgentCreate, AgentState, AgentUpdate, agent_out
from ._models_common import ResponseModel
from ._models_messages import StopReasonType
from ._params import AgentId, Cursor, IdQuery, NonBlankQuery
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["Deleted", "agents_router", "create_request"]

MAX_PAGE = 1000
Limit = Annotated[int, Query(ge=0, le=MAX_PAGE)]


class Deleted(ResponseModel):
    """The answer of a delete (Letta answers ``{"message": ...}``)."""

    message: str


def create_request(body: AgentCreate) -> CreateAgent:
    """The agent core's CreateAgent for a Letta create body (unset fields keep their
    defaults; an empty name lets the service name the agent after its id)."""
    options: dict[str, Any] = {}
    for key, value in (
        ("system", body.system),
        ("model", body.model_handle()),
        ("embedding", body.embedding),
        ("context_window", body.context_window()),
        ("max_tokens", body.output_tokens()),
        ("description", body.description),
        ("timezone", body.timezone),
        ("metadata", body.metadata),
    ):
        if value is not None:
            options[key] = value
    return CreateAgent(
        name=body.name or "",
        agent_type=body.agent_type,
        tags=tuple(body.tags or ()),
        memory_blocks=tuple(
            BlockCreateRecord(
                label=b.label,
                value=b.value,
                limit=b.limit,
                description=b.description or "",
                read_only=b.read_only,
                metadata=b.metadata or {},
            )
            for b in body.memory_blocks or ()
        ),
        block_ids=tuple(body.block_ids or ()),
        tool_ids=tuple(body.tool_ids or ()),
        tool_rules=tuple(r.to_record() for r in body.tool_rules or ()),
        initial_messages=None
        if body.initial_message_sequence is None
        else tuple(m.to_input() for m in body.initial_message_sequence),
        identity_ids=tuple(body.identity_ids or ()),
        folder_ids=tuple(body.folder_ids or ()),
        **options,
    )


def agents_router() -> APIRouter:
    router = APIRouter(tags=["agents"])

    async def create_agent(body: AgentCreate) -> AgentState:
        """Create an agent with its memory blocks and tools (Letta's base tools unless
        ``include_base_tools`` is false), linked to ``identity_ids`` and attached to
        ``folder_ids`` (each must exist: a 404 names the first missing one)."""
        view = await current_service().create_agent(
            create_request(body),
            tools=tuple(body.tools or ()),
            include_base_tools=body.include_base_tools,
        )
        return agent_out(view)

    async def list_agents(
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Literal["asc", "desc"] | None = None,
        ascending: bool | None = None,
        name: NonBlankQuery = None,
        tags: Annotated[list[str] | None, Query()] = None,
        match_all_tags: bool = False,
        query_text: str | None = None,
        include: Annotated[list[str] | None, Query()] = None,
        include_relationships: Annotated[list[str] | None, Query()] = None,
        identity_id: IdQuery = None,
        last_stop_reason: StopReasonType | None = None,
        order_by: Literal["created_at"] = "created_at",
        sort_by: Literal["created_at"] | None = None,
    ) -> list[AgentState]:
        """Agents, newest first by default; ``after``/``before`` are agent ids relative to
        the order. ``include``/``include_relationships`` are accepted and ignored (every
        relation is always included); ``identity_id`` keeps the agents attached to it,
        ``last_stop_reason`` those whose latest run stopped so. Filters on what Kelpie has
        not (identifier keys, projects, templates, users) are not declared, so they are
        refused (422, ``_query.known_query``)."""
        if order is None:
            order = "asc" if ascending else "desc"
        views = await current_service().list_agents(
            after=after,
            before=before,
            limit=limit,
            order=order,
            name=name,
            tags=tuple(tags or ()),
            match_all_tags=match_all_tags,
            query_text=query_text,
            identity_id=identity_id,
            last_stop_reason=last_stop_reason,
        )
        return [agent_out(v) for v in views]

    collection_route(router, "/v1/agents/", create_agent, ["POST"], response_model=AgentState)
    collection_route(router, "/v1/agents/", list_agents, ["GET"], response_model=list[AgentState])

    @router.get("/v1/agents/{agent_id}", responses=ERROR_RESPONSES)
    async def get_agent(
        agent_id: AgentId,
        include: Annotated[list[str] | None, Query()] = None,
        include_relationships: Annotated[list[str] | None, Query()] = None,
    ) -> AgentState:
        """The agent, every relation included (so ``include``/``include_relationships``,
        which select relations in Letta, always get what they ask for, and more)."""
        return agent_out(await current_service().get_agent(agent_id))

    @router.patch("/v1/agents/{agent_id}", responses=ERROR_RESPONSES)
    async def update_agent(agent_id: AgentId, body: AgentUpdate) -> AgentState:
        """Change the fields given; ``tool_ids``/``block_ids`` replace the attached sets."""
        changes = body.changes()
        if body.tool_ids is not None:
            changes["tool_ids"] = tuple(body.tool_ids)
        if body.block_ids is not None:
            changes["block_ids"] = tuple(body.block_ids)
        if not changes:
            return agent_out(await current_service().get_agent(agent_id))
        return agent_out(await current_service().update_agent(agent_id, changes))

    @router.delete("/v1/agents/{agent_id}", responses=ERROR_RESPONSES)
    async def delete_agent(agent_id: AgentId) -> Deleted:
        await current_service().delete_agent(agent_id)
        return Deleted(message=f"Agent id={agent_id} successfully deleted")

    return router
