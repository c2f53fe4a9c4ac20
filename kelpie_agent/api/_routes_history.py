"""Message histories: an agent's (list it with Letta's cursors, reset it) and every agent's
(``/v1/messages/``: list, retrieve by id)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from kelpie_agent.agent import AgentMessage, letta_json

from ._context import current_service
from ._models_agents import AgentState, agent_out
from ._models_messages import LettaMessage, MessageType
from ._models_unsupported import ResetRequest
from ._params import AgentId, Cursor, IdQuery, MessageId
from ._routes_agents import MAX_PAGE
from ._routes_messages import keeper
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["history_page", "history_router"]


async def history_page(
    agent_id: str,
    after: str | None,
    before: str | None,
    limit: int,
    order: str,
    use_assistant_message: bool,
    include_return_message_types: list[MessageType] | None,
    conversation_id: str | None = None,
) -> list[LettaMessage]:
    """A page of a history (the agent's, or its conversation's) with only the message types
    asked for: pages are read until the page is full."""
    keep = keeper(include_return_message_types)
    out: list[dict[str, Any]] = []
    cursor_after = after
    while True:
        batch: list[AgentMessage] = await current_service().list_messages(
            agent_id,
            after=cursor_after,
            before=before,
            limit=limit,
            order=order,
            use_assistant_message=use_assistant_message,
            conversation_id=conversation_id,
        )
        out.extend(m for m in (letta_json(m) for m in batch) if keep(m))
        if include_return_message_types is None or len(out) >= limit or len(batch) < limit:
            break
        if before is not None and after is None:
            break  # paging backwards: one window only
        cursor_after = batch[-1].id
    return out[:limit]  # type: ignore[return-value]


def history_router() -> APIRouter:
    router = APIRouter(tags=["messages"], responses=ERROR_RESPONSES)

    @router.get("/v1/agents/{agent_id}/messages")
    async def list_messages(
        agent_id: AgentId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Annotated[int, Query(ge=0, le=MAX_PAGE)] = 100,
        order: Literal["asc", "desc"] = "desc",
        use_assistant_message: bool = True,
        include_return_message_types: Annotated[list[MessageType] | None, Query()] = None,
    ) -> list[LettaMessage]:
        """The agent's history, newest first by default; ``after``/``before`` are message
        ids relative to the order."""
        return await history_page(
            agent_id,
            after,
            before,
            limit,
            order,
            use_assistant_message,
            include_return_message_types,
        )

    @router.post("/v1/agents/{agent_id}/recompile")
    async def recompile(
        agent_id: AgentId, dry_run: bool = False, update_timestamp: bool = False
    ) -> str:
        """The system prompt the agent's next step sends, compiled from its current memory;
        unless ``dry_run`` it replaces the stored system message (``update_timestamp``
        changes nothing: the prompt always carries the current time)."""
        return await current_service().recompile(agent_id, dry_run=dry_run)

    @router.patch("/v1/agents/{agent_id}/reset-messages")
    async def reset_messages(agent_id: AgentId, body: ResetRequest | None = None) -> AgentState:
        """Delete the agent's message history (memory and archival memory stay)."""
        return agent_out(await current_service().reset_messages(agent_id))

    async def list_all_messages(
        after: Cursor = None,
        before: Cursor = None,
        limit: Annotated[int, Query(ge=0, le=MAX_PAGE)] = 100,
        order: Literal["asc", "desc"] = "desc",
        conversation_id: IdQuery = None,
        include_return_message_types: Annotated[list[MessageType] | None, Query()] = None,
    ) -> list[LettaMessage]:
        """Every agent's messages by date, newest first by default; ``after``/``before``
        are message ids relative to the order."""
        messages = await current_service().all_messages(
            after=after,
            before=before,
            limit=limit,
            order=order,
            types=include_return_message_types,
            conversation_id=conversation_id,
        )
        return [letta_json(m) for m in messages]  # type: ignore[misc]

    collection_route(
        router, "/v1/messages/", list_all_messages, ["GET"], response_model=list[LettaMessage]
    )

    @router.get("/v1/messages/{message_id}")
    async def retrieve_message(message_id: MessageId) -> list[LettaMessage]:
        """One message by id, whichever agent has it."""
        messages = await current_service().get_message(message_id)
        return [letta_json(m) for m in messages]  # type: ignore[misc]

    return router
