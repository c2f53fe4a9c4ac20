"""Archival memory in Letta's shapes: ``Passage``, insert, and the search answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from kelpie_agent.agent import PassageHit, PassageRecord

from ._models_common import Id, NonBlank, RequestModel, ResponseModel, epoch_datetime
from ._params import DateTime

__all__ = [
    "Passage",
    "PassageCreate",
    "PassageSearchAll",
    "PassageSearchItem",
    "PassageSearchResponse",
    "PassageSearchResult",
    "passage_out",
    "search_item_out",
    "search_out",
]


class Passage(ResponseModel):
    """An archival passage (Letta's Passage; the embedding itself is not sent)."""

    id: str
    text: str
    tags: list[str] = Field(default_factory=list)
    created_at: datetime | None = None


class PassageCreate(RequestModel):
    """``POST /v1/agents/{id}/archival-memory``."""

    text: NonBlank
    tags: list[str] | None = None


class PassageSearchResult(ResponseModel):
    id: str
    content: str
    timestamp: str
    tags: list[str] = Field(default_factory=list)


class PassageSearchResponse(ResponseModel):
    """``GET /v1/agents/{id}/archival-memory/search``: best match first."""

    count: int
    results: list[PassageSearchResult]


def passage_out(record: PassageRecord) -> Passage:
    return Passage(
        id=record.id,
        text=record.text,
        tags=list(record.tags),
        created_at=epoch_datetime(record.created_at),
    )


def search_out(hits: list[PassageHit]) -> PassageSearchResponse:
    results = [
        PassageSearchResult(
            id=hit.passage.id,
            content=hit.passage.text,
            timestamp=epoch_datetime(hit.passage.created_at).isoformat(),
            tags=list(hit.passage.tags),
        )
        for hit in hits
    ]
    return PassageSearchResponse(count=len(results), results=results)


class PassageSearchAll(RequestModel):
    """``POST /v1/passages/search`` (Letta's PassageSearchRequest)."""

    query: NonBlank | None = None
    agent_id: Id | None = None
    archive_id: Id | None = None
    tags: list[str] | None = None
    tag_match_mode: Literal["any", "all"] = "any"
    limit: int = Field(default=50, ge=0, le=1000)
    start_date: DateTime | None = None
    end_date: DateTime | None = None


class PassageSearchItem(ResponseModel):
    """One passage found across agents, with its relevance score."""

    passage: Passage
    score: float
    metadata: dict[str, Any] = Field(default_factory=dict)


def search_item_out(agent_id: str, hit: PassageHit) -> PassageSearchItem:
    return PassageSearchItem(
        passage=passage_out(hit.passage), score=hit.score, metadata={"agent_id": agent_id}
    )
