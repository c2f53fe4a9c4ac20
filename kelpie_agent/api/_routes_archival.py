"""An agent's archival memory: insert, list, search, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from kelpie_agent.service import InvalidError
from kelpie_agent.service._validate import NOT_BLANK

from ._context import current_service
from ._models_archival import (
    Passage,
    PassageCreate,
    PassageSearchAll,
    PassageSearchItem,
    PassageSearchResponse,
    passage_out,
    search_item_out,
    search_out,
)
from ._params import AgentId, Cursor, DateTimeQuery, PassageId, epoch_seconds
from ._routes_agents import MAX_PAGE, Deleted
from ._routing import ERROR_RESPONSES

__all__ = ["archival_router"]


def archival_router() -> APIRouter:
    router = APIRouter(tags=["archival memory"], responses=ERROR_RESPONSES)

    @router.post("/v1/agents/{agent_id}/archival-memory")
    async def insert_passage(agent_id: AgentId, body: PassageCreate) -> list[Passage]:
        """Store a passage (embedded for search); answers the passages created."""
        records = await current_service().insert_passage(
            agent_id, body.text, tags=tuple(body.tags or ())
        )
        return [passage_out(r) for r in records]

    @router.get("/v1/agents/{agent_id}/archival-memory")
    async def list_passages(
        agent_id: AgentId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Annotated[int, Query(ge=0, le=MAX_PAGE)] = 100,
        search: str | None = None,
        ascending: bool = True,
    ) -> list[Passage]:
        """Passages oldest first (``ascending``); ``search`` keeps texts containing it."""
        records = await current_service().list_passages(
            agent_id, after=after, before=before, limit=limit, search=search, ascending=ascending
        )
        return [passage_out(r) for r in records]

    @router.get("/v1/agents/{agent_id}/archival-memory/search")
    async def search_passages(
        agent_id: AgentId,
        query: Annotated[str, Query(pattern=NOT_BLANK)],
        tags: Annotated[list[str] | None, Query()] = None,
        tag_match_mode: Annotated[str, Query(pattern="^(any|all)$")] = "any",
        top_k: Annotated[int | None, Query(ge=0, le=MAX_PAGE)] = None,
        start_datetime: DateTimeQuery = None,
        end_datetime: DateTimeQuery = None,
    ) -> PassageSearchResponse:
        """Semantic search, best match first; the datetimes bound ``created_at``."""
        hits = await current_service().search_passages(
            agent_id,
            query,
            tags=tuple(tags or ()),
            tag_match_mode=tag_match_mode,
            top_k=5 if top_k is None else top_k,
            start=epoch_seconds(start_datetime, "start_datetime"),
            end=epoch_seconds(end_datetime, "end_datetime"),
        )
        return search_out(hits)

    @router.post("/v1/passages/search")
    async def search_all_passages(body: PassageSearchAll) -> list[PassageSearchItem]:
        """Semantic search over one agent's archival memory (``agent_id``) or every
        agent's, best first; ``metadata.agent_id`` names the passage's agent."""
        if body.archive_id is not None:
            raise InvalidError(
                "body.archive_id",
                "searching one archive is not served: search by agent_id",
                status=400,
            )
        if body.query is None:
            raise InvalidError("body.query", "a search needs a query", status=400)
        found = await current_service().search_all_passages(
            body.query,
            agent_id=body.agent_id,
            tags=tuple(body.tags or ()),
            tag_match_mode=body.tag_match_mode,
            limit=body.limit,
            start=epoch_seconds(body.start_date, "start_date", "body"),
            end=epoch_seconds(body.end_date, "end_date", "body"),
        )
        return [search_item_out(agent, hit) for agent, hit in found]

    @router.delete("/v1/agents/{agent_id}/archival-memory/{memory_id}")
    async def delete_passage(agent_id: AgentId, memory_id: PassageId) -> Deleted:
        await current_service().delete_passage(agent_id, memory_id)
        return Deleted(message=f"Passage id={memory_id} successfully deleted")

    return router
