"""An agent's archival memory: insert, list, search, delete."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import TypeAdapter, ValidationError

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
from ._params import RFC3339, AgentId, Cursor, DateTimeQuery, PassageId
from ._routes_agents import MAX_PAGE, Deleted
from ._routing import ERROR_RESPONSES

__all__ = ["archival_router"]


# Parsed with an adapter built at import: route signatures avoid ``datetime``, whose module
# global a simulation's guards replace (FastAPI resolves the annotations in create_app).
_DATETIME = TypeAdapter(datetime)


def _epoch(text: str | None, field: str, where: str = "query") -> float | None:
    """An ISO 8601 datetime (of the query, or the body) as epoch seconds (a time without a
    zone is UTC)."""
    if text is None:
        return None
    if not re.fullmatch(RFC3339, text):
        raise InvalidError(f"{where}.{field}", f"not an RFC 3339 date-time: {text!r}")
    try:
        moment = _DATETIME.validate_python(text)
    except ValidationError as error:
        problem = error.errors()[0]["msg"]
        raise InvalidError(f"{where}.{field}", f"{problem}: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):
        raise InvalidError(f"{where}.{field}", f"out of range: {moment.isoformat()}") from None


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
            start=_epoch(start_datetime, "start_datetime"),
            end=_epoch(end_datetime, "end_datetime"),
        )
        return search_out(hits)

    @router.post("/v1/passages/search")
    async def search_all_passages(body: PassageSearchAll) -> list[PassageSearchItem]:
        """Semantic search over one agent's archival memory (``agent_id``) or every
        agent's, best first; ``metadata.agent_id`` names the passage's agent."""
        if body.archive_id is not None:
            raise InvalidError("body.archive_id", "archives are not served: search by agent_id")
        if body.query is None:
            raise InvalidError("body.query", "a search needs a query")
        found = await current_service().search_all_passages(
            body.query,
            agent_id=body.agent_id,
            tags=tuple(body.tags or ()),
            tag_match_mode=body.tag_match_mode,
            limit=body.limit,
            start=_epoch(body.start_date, "start_date", "body"),
            end=_epoch(body.end_date, "end_date", "body"),
        )
        return [search_item_out(agent, hit) for agent, hit in found]

    @router.delete("/v1/agents/{agent_id}/archival-memory/{memory_id}")
    async def delete_passage(agent_id: AgentId, memory_id: PassageId) -> Deleted:
        await current_service().delete_passage(agent_id, memory_id)
        return Deleted(message=f"Passage id={memory_id} successfully deleted")

    return router
