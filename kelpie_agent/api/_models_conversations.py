"""Conversations in Letta's shapes: ``Conversation`` out; create, update and message bodies in.

Every field the SDK can send takes effect or is refused with a 422 naming it: a
conversation's own ``model``, ``model_settings`` and ``context_window_limit`` (overriding the
agent's) are not implemented, nor are the message options Kelpie has no machinery for
(``override_model``, ``client_tools``, log-probabilities, ...), so they are refused.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from kelpie_agent.agent import ConversationRecord

from ._models_common import Id, RequestModel, ResponseModel, epoch_datetime
from ._models_compaction import CompactionSettingsModel
from ._models_messages import MessageRequest

__all__ = [
    "Conversation",
    "ConversationCompactRequest",
    "ConversationMessageRequest",
    "CreateConversationRequest",
    "UpdateConversationRequest",
    "conversation_out",
]

_OVERRIDES = "per-conversation model settings are not supported (the agent's are used)"


def _refuse_overrides(value: object) -> object:
    if value is not None:
        raise ValueError(_OVERRIDES)
    return value


class Conversation(ResponseModel):
    """Letta's Conversation."""

    id: str
    agent_id: str
    archived: bool | None = None
    archived_at: datetime | None = None
    context_window_limit: int | None = None
    created_at: datetime | None = None
    created_by_id: str | None = None
    description: str | None = None
    in_context_message_ids: list[str] | None = None
    last_message_at: datetime | None = None
    last_updated_by_id: str | None = None
    model: str | None = None
    model_settings: dict[str, Any] | None = None
    summary: str | None = None
    updated_at: datetime | None = None


def conversation_out(record: ConversationRecord) -> Conversation:
    return Conversation(
        id=record.id,
        agent_id=record.agent_id,
        archived=record.archived,
        archived_at=epoch_datetime(record.archived_at) if record.archived_at else None,
        created_at=epoch_datetime(record.created_at),
        description=record.description,
        last_message_at=(
            epoch_datetime(record.last_message_at) if record.last_message_at else None
        ),
        summary=record.summary,
        updated_at=epoch_datetime(record.updated_at),
    )


class _Overrides(RequestModel):
    model: str | None = None
    model_settings: dict[str, Any] | None = None
    context_window_limit: int | None = None

    @field_validator("model", "model_settings", "context_window_limit")
    @classmethod
    def _no_overrides(cls, value: object) -> object:
        return _refuse_overrides(value)


class CreateConversationRequest(_Overrides):
    """``POST /v1/conversations/?agent_id=...``."""

    summary: str | None = None
    description: str | None = None
    hidden: bool = False


class UpdateConversationRequest(_Overrides):
    """``PATCH /v1/conversations/{id}``: the fields given change (null clears a text)."""

    summary: str | None = None
    description: str | None = None
    archived: bool | None = None
    last_message_at: datetime | None = None

    def changes(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ("summary", "description", "archived", "last_message_at"):
            if name not in self.model_fields_set:
                continue
            value = getattr(self, name)
            if name == "archived" and value is None:
                raise ValueError("archived: must be true or false")
            if name == "last_message_at" and value is not None:
                value = value.timestamp()
            out[name] = value
        return out


class ConversationMessageRequest(MessageRequest):
    """``POST /v1/conversations/{id}/messages``: streamed unless ``streaming: false``
    (Letta's default); ``background`` runs it as a background run, followed by the stream."""

    model_config = ConfigDict(strict=True, extra="forbid")

    streaming: bool = True
    background: bool = False
    agent_id: Id | None = None


class ConversationCompactRequest(RequestModel):
    """``POST /v1/conversations/{id}/compact``."""

    agent_id: Id | None = None
    compaction_settings: CompactionSettingsModel | None = None


class RecompileRequest(RequestModel):
    """``POST /v1/conversations/{id}/recompile``'s body."""

    agent_id: Id | None = None
    compaction_settings: CompactionSettingsModel | None = Field(default=None)
