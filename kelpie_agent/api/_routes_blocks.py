"""Memory blocks: standalone (``/v1/blocks/``) and one agent's core memory (by label)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from ._context import current_service
from ._models_agents import AgentState, agent_out
from ._models_blocks import Block, BlockCreate, BlockUpdate, block_out
from ._params import AgentId, BlockId, BlockLabel, Cursor, LabelQuery
from ._routes_agents import MAX_PAGE, Deleted
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["blocks_router"]

Limit = Annotated[int, Query(ge=0, le=MAX_PAGE)]
Order = Literal["asc", "desc"]


def blocks_router() -> APIRouter:
    router = APIRouter(tags=["blocks"], responses=ERROR_RESPONSES)

    # -- standalone blocks ---------------------------------------------------------------------
    async def create_block(body: BlockCreate) -> Block:
        block = await current_service().create_block(
            body.label,
            body.value,
            limit=body.limit,
            description=body.description or "",
            read_only=body.read_only,
            metadata=body.metadata,
        )
        return block_out(block)

    async def list_blocks(
        label: LabelQuery = None,
        label_search: str | None = None,
        value_search: str | None = None,
        description_search: str | None = None,
        connected_to_agents_count_gt: Annotated[int | None, Query(ge=0)] = None,
        connected_to_agents_count_lt: Annotated[int | None, Query(ge=0)] = None,
        connected_to_agents_count_eq: Annotated[list[int] | None, Query()] = None,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Order = "asc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[Block]:
        """Every block, oldest first by default; ``after``/``before`` are block ids. The
        searches are case-insensitive parts; the ``connected_to_agents_count_*`` filters count
        the agents a block is attached to. Filters on what Kelpie's blocks do not have
        (identities, tags, names, templates, projects) are not declared, so they are refused
        (422, ``_query.known_query``)."""
        blocks = await current_service().list_blocks(
            label=label,
            label_search=label_search,
            value_search=value_search,
            description_search=description_search,
            agents_gt=connected_to_agents_count_gt,
            agents_lt=connected_to_agents_count_lt,
            agents_eq=tuple(connected_to_agents_count_eq or ()),
            after=after,
            before=before,
            limit=limit,
            order=order,
        )
        return [block_out(b) for b in blocks]

    collection_route(router, "/v1/blocks/", create_block, ["POST"], response_model=Block)
    collection_route(router, "/v1/blocks/", list_blocks, ["GET"], response_model=list[Block])

    @router.get("/v1/blocks/{block_id}")
    async def get_block(block_id: BlockId) -> Block:
        return block_out(await current_service().get_block(block_id))

    @router.patch("/v1/blocks/{block_id}")
    async def update_block(block_id: BlockId, body: BlockUpdate) -> Block:
        changes = body.changes()
        if not changes:
            return block_out(await current_service().get_block(block_id))
        return block_out(await current_service().update_block(block_id, **changes))

    @router.delete("/v1/blocks/{block_id}")
    async def delete_block(block_id: BlockId) -> Deleted:
        await current_service().delete_block(block_id)
        return Deleted(message=f"Block id={block_id} successfully deleted")

    @router.get("/v1/blocks/{block_id}/agents")
    async def block_agents(
        block_id: BlockId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Order = "asc",
    ) -> list[AgentState]:
        """The agents the block is attached to, oldest first by default."""
        views = await current_service().block_agents(
            block_id, after=after, before=before, limit=limit, order=order
        )
        return [agent_out(v) for v in views]

    # -- an agent's core memory ----------------------------------------------------------------
    @router.get("/v1/agents/{agent_id}/core-memory/blocks")
    async def list_agent_blocks(
        agent_id: AgentId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Order = "asc",
    ) -> list[Block]:
        """The agent's blocks in attachment order (``asc``)."""
        blocks = await current_service().list_agent_blocks(
            agent_id, after=after, before=before, limit=limit, order=order
        )
        return [block_out(b) for b in blocks]

    @router.get("/v1/agents/{agent_id}/core-memory/blocks/{block_label}")
    async def get_agent_block(agent_id: AgentId, block_label: BlockLabel) -> Block:
        return block_out(await current_service().get_agent_block(agent_id, block_label))

    @router.patch("/v1/agents/{agent_id}/core-memory/blocks/attach/{block_id}")
    async def attach_block(agent_id: AgentId, block_id: BlockId) -> AgentState:
        return agent_out(await current_service().attach_block(agent_id, block_id))

    @router.patch("/v1/agents/{agent_id}/core-memory/blocks/detach/{block_id}")
    async def detach_block(agent_id: AgentId, block_id: BlockId) -> AgentState:
        return agent_out(await current_service().detach_block(agent_id, block_id))

    @router.patch("/v1/agents/{agent_id}/core-memory/blocks/{block_label}")
    async def update_agent_block(
        agent_id: AgentId, block_label: BlockLabel, body: BlockUpdate
    ) -> Block:
        """Change the block with this label (``label`` renames it)."""
        block = await current_service().update_agent_block(
            agent_id,
            block_label,
            value=body.value,
            limit=body.limit,
            description=body.description,
            read_only=body.read_only,
            new_label=body.label,
            metadata=body.metadata,
        )
        return block_out(block)

    return router
