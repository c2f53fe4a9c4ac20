"""``POST /v1/messages/search``: every agent's messages (or one's), ranked against a query."""

from __future__ import annotations

from fastapi import APIRouter

from ._context import current_service
from ._models_search import MessageSearch, MessageSearchResult, search_result_out
from ._params import epoch_seconds
from ._routing import ERROR_RESPONSES

__all__ = ["search_router"]


def search_router() -> APIRouter:
    router = APIRouter(tags=["messages"], responses=ERROR_RESPONSES)

    @router.post("/v1/messages/search")
    async def search_messages(body: MessageSearch) -> list[MessageSearchResult]:
        """Messages users, agents and the system wrote, best match first: ``vector``,
        ``fts`` or ``hybrid`` (as ``tools.search``); ``agent_id`` and the dates filter."""
        found = await current_service().search_messages(
            body.query,
            agent_id=body.agent_id,
            conversation_id=body.conversation_id,
            mode=body.search_mode,
            start=epoch_seconds(body.start_date, "start_date", "body"),
            end=epoch_seconds(body.end_date, "end_date", "body"),
            limit=body.limit,
        )
        return [search_result_out(agent, m) for agent, m in found]

    return router
