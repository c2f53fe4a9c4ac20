"""``/v1/conversations/``: several threads of history on one agent (Letta's conversations).

A conversation id names the thread; ``default`` with ``agent_id`` names the agent's own
history where Letta accepts it (messages, fork, cancel, compact, recompile, stream).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import attrs
from fastapi import APIRouter, Path, Query

from kelpie_agent.agent import CompactMessages
from kelpie_agent.service import InvalidError, NotFoundError

from ._context import current_service
from ._models_compaction import CompactionResponse
from ._models_conversations import (
    Conversation,
    ConversationCompactRequest,
    ConversationMessageRequest,
    CreateConversationRequest,
    RecompileRequest,
    UpdateConversationRequest,
    conversation_out,
)
from ._models_messages import LettaMessage, LettaResponse, MessageType
from ._params import ID_PATTERN, Cursor, IdQuery
from ._routes_agents import MAX_PAGE
from ._routes_history import history_page
from ._routes_messages import STREAM_DOC, letta_response, stream_response
from ._routes_runs import RunStreamRequest, follow_response
from ._routing import ERROR_RESPONSES, collection_route
from ._sse import SseResponse

__all__ = ["conversations_router"]

ConversationId = Annotated[
    str, Path(pattern=ID_PATTERN, description="A conversation id (conv-...), or 'default'")
]


def conversations_router() -> APIRouter:
    router = APIRouter(tags=["conversations"], responses=ERROR_RESPONSES)

    async def create(
        agent_id: Annotated[str, Query(pattern=ID_PATTERN, description="The agent's id")],
        body: CreateConversationRequest | None = None,
    ) -> Conversation:
        """A new conversation of the agent: its own history, the agent's memory."""
        body = body or CreateConversationRequest()
        record = await current_service().create_conversation(
            agent_id, summary=body.summary, description=body.description, hidden=body.hidden
        )
        return conversation_out(record)

    async def list_(
        agent_id: IdQuery = None,
        after: Cursor = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at", "last_run_completion", "last_message_at"] = "created_at",
        archive_status: Literal["unarchived", "archived", "all"] = "unarchived",
        summary_search: str | None = None,
    ) -> list[Conversation]:
        """Conversations of an agent (or all), newest first by default; hidden ones are left
        out; ``after`` is a conversation id relative to the order."""
        records = await current_service().list_conversations(
            agent_id=agent_id,
            after=after,
            limit=limit,
            order=order,
            order_by=order_by,
            archive_status=archive_status,
            summary_search=summary_search,
        )
        return [conversation_out(r) for r in records]

    collection_route(router, "/v1/conversations/", create, ["POST"])
    collection_route(router, "/v1/conversations/", list_, ["GET"])

    @router.get("/v1/conversations/{conversation_id}")
    async def retrieve(conversation_id: ConversationId) -> Conversation:
        record = await current_service().get_conversation(conversation_id)
        return conversation_out(record)

    @router.patch("/v1/conversations/{conversation_id}")
    async def update(
        conversation_id: ConversationId, body: UpdateConversationRequest
    ) -> Conversation:
        """Change the summary, description, archived flag or last_message_at."""
        try:
            changes = body.changes()
        except ValueError as error:
            raise InvalidError("body.archived", str(error)) from None
        record = await current_service().update_conversation(conversation_id, changes)
        return conversation_out(record)

    @router.delete("/v1/conversations/{conversation_id}")
    async def delete(conversation_id: ConversationId) -> None:
        """Delete the conversation and its messages (its runs and steps stay)."""
        await current_service().delete_conversation(conversation_id)

    @router.post("/v1/conversations/{conversation_id}/fork")
    async def fork(
        conversation_id: ConversationId,
        agent_id: IdQuery = None,
        hidden: bool = False,
        message_id: IdQuery = None,
    ) -> Conversation:
        """A new conversation with a copy of this one's history (up to ``message_id``)."""
        record = await current_service().fork_conversation(
            conversation_id, agent_id=agent_id, message_id=message_id, hidden=hidden
        )
        return conversation_out(record)

    @router.post("/v1/conversations/{conversation_id}/cancel")
    async def cancel(conversation_id: ConversationId, agent_id: IdQuery = None) -> dict[str, Any]:
        """Ask the conversation's runs this node serves to stop after their current step."""
        service = current_service()
        owner, thread = await service.thread_of(conversation_id, agent_id)
        return {"cancelled": service.cancel_runs(thread or owner)}

    @router.post("/v1/conversations/{conversation_id}/recompile")
    async def recompile(
        conversation_id: ConversationId, dry_run: bool = False, body: RecompileRequest | None = None
    ) -> str:
        """The system prompt the conversation's next step sends (the agent's memory is
        shared); unless ``dry_run`` it replaces the conversation's stored system message."""
        service = current_service()
        agent_id = body.agent_id if body is not None else None
        owner, thread = await service.thread_of(conversation_id, agent_id)
        return await service.recompile(owner, thread, dry_run=dry_run)

    @router.post("/v1/conversations/{conversation_id}/compact")
    async def compact(
        conversation_id: ConversationId, body: ConversationCompactRequest | None = None
    ) -> CompactionResponse:
        """Summarize the oldest messages in the conversation's context."""
        service = current_service()
        body = body or ConversationCompactRequest()
        owner, thread = await service.thread_of(conversation_id, body.agent_id)
        settings = body.compaction_settings
        request = settings.request() if settings is not None else CompactMessages()
        result = await service.compact_messages(owner, attrs.evolve(request, thread=thread))
        return CompactionResponse(
            summary=result.summary,
            num_messages_before=result.num_messages_before,
            num_messages_after=result.num_messages_after,
        )

    @router.get("/v1/conversations/{conversation_id}/messages")
    async def list_messages(
        conversation_id: ConversationId,
        agent_id: IdQuery = None,
        after: Cursor = None,
        before: Cursor = None,
        limit: Annotated[int, Query(ge=0, le=MAX_PAGE)] = 100,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at"] = "created_at",
        include_return_message_types: Annotated[list[MessageType] | None, Query()] = None,
        group_id: IdQuery = None,
        include_err: bool | None = None,
    ) -> list[LettaMessage]:
        """The conversation's history, newest first by default (Letta's cursors)."""
        if group_id is not None:
            raise NotFoundError("group", group_id, f"group_id: no group {group_id!r}")
        owner, thread = await current_service().thread_of(conversation_id, agent_id)
        return await history_page(
            owner, after, before, limit, order, True, include_return_message_types, thread
        )

    @router.post(
        "/v1/conversations/{conversation_id}/messages",
        response_model=LettaResponse,
        responses={200: {"content": STREAM_DOC["content"]}},
    )
    async def send(conversation_id: ConversationId, body: ConversationMessageRequest) -> Any:
        """Run the agent on the input in this conversation: streamed (server-sent events)
        unless ``streaming: false``; ``background: true`` starts a background run and
        streams it from storage (resumable with ``/stream``)."""
        service = current_service()
        owner, thread = await service.thread_of(conversation_id, body.agent_id)
        if body.background:
            if not body.streaming:
                raise InvalidError("body.background", "background=true requires streaming=true")
            record = await service.start_run(
                owner,
                body.inputs(),
                max_steps=body.max_steps,
                use_assistant_message=body.use_assistant_message,
                conversation_id=thread,
            )
            follow = RunStreamRequest(include_pings=body.include_pings)
            return follow_response(record.id, follow)
        if body.streaming:
            return stream_response(owner, body, thread)
        problem = body.stream_only_problem()
        if problem is not None:
            raise InvalidError(*problem)
        result = await service.send_message(
            owner,
            body.inputs(),
            max_steps=body.max_steps,
            use_assistant_message=body.use_assistant_message,
            conversation_id=thread,
        )
        return letta_response(result, body.include_return_message_types)

    @router.post(
        "/v1/conversations/{conversation_id}/stream",
        response_class=SseResponse,
        status_code=200,
        responses={200: STREAM_DOC},
    )
    async def stream(conversation_id: ConversationId, body: RunStreamRequest) -> SseResponse:
        """Follow the conversation's latest run (or ``run_id``) from storage, after
        ``starting_after``."""
        service = current_service()
        owner, thread = await service.thread_of(conversation_id, body.agent_id)
        run_id = body.run_id
        if run_id is None:
            runs = await service.list_runs(
                agent_ids=[owner], conversation_id=thread, limit=MAX_PAGE, order="desc"
            )
            runs = [r for r in runs if r.thread_id == thread]  # the agent's own: None
            if not runs:
                raise NotFoundError("run", None, f"{conversation_id}: no run to stream")
            run_id = runs[0].id
        return follow_response(run_id, body)

    return router
