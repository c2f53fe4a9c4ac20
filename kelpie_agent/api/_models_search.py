"""Message search in Letta's shapes (``POST /v1/messages/search``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from kelpie_agent.agent import AgentMessage

from ._models_common import Id, RequestModel, ResponseModel, epoch_datetime
from ._params import DateTime

__all__ = ["MessageSearch", "MessageSearchResult", "search_result_out"]


class MessageSearch(RequestModel):
    """``POST /v1/messages/search`` (Letta's SearchAllMessagesRequest)."""

    query: str
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    agent_id: Id | None = None
    conversation_id: Id | None = None
    limit: int = Field(default=50, ge=1, le=1000)
    start_date: DateTime | None = None
    end_date: DateTime | None = None


class MessageSearchResult(ResponseModel):
    """One message found, with its agent (Letta's ``*MessageListResult``)."""

    message_type: Literal[
        "system_message", "user_message", "reasoning_message", "assistant_message"
    ]
    message_id: str
    agent_id: str | None = None
    conversation_id: str | None = None
    created_at: datetime
    content: str | None = None
    reasoning: str | None = None


def search_result_out(agent_id: str, message: AgentMessage) -> MessageSearchResult:
    reasoning = message.message_type == "reasoning_message"
    text = getattr(message, "reasoning" if reasoning else "content", "")
    return MessageSearchResult(
        message_type=message.message_type,  # type: ignore[arg-type]
        message_id=message.id,
        agent_id=agent_id,
        created_at=epoch_datetime(message.date),
        content=None if reasoning else str(text),
        reasoning=str(text) if reasoning else None,
    )
