"""Context compaction on demand: ``POST /v1/agents/{id}/summarize`` (messages.compact)."""

from __future__ import annotations

from fastapi import APIRouter

from kelpie_agent.agent import CompactMessages

from ._context import current_service
from ._models_compaction import CompactionResponse, CompactRequest
from ._params import AgentId
from ._routing import ERROR_RESPONSES

__all__ = ["compaction_router"]


def compaction_router() -> APIRouter:
    router = APIRouter(tags=["messages"], responses=ERROR_RESPONSES)

    @router.post("/v1/agents/{agent_id}/summarize")
    async def compact(agent_id: AgentId, body: CompactRequest | None = None) -> CompactionResponse:
        """Summarize the oldest messages in the agent's context into a summary message (they
        stay stored and searchable)."""
        settings = body.compaction_settings if body is not None else None
        request = settings.request() if settings is not None else CompactMessages()
        result = await current_service().compact_messages(agent_id, request)
        return CompactionResponse(
            summary=result.summary,
            num_messages_before=result.num_messages_before,
            num_messages_after=result.num_messages_after,
        )

    return router
