"""Runs in Letta's shapes: ``Run`` (with its ``request_config``) and the usage answer."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from kelpie_agent.agent import RunRecord

from ._models_common import JsonObject, ResponseModel, epoch_datetime
from ._models_messages import MessageType, StopReasonType

__all__ = ["RequestConfig", "Run", "RunStatus", "RunUsage", "run_out", "usage_out"]

RunStatus = Literal["created", "running", "completed", "failed", "cancelled"]


class RequestConfig(ResponseModel):
    """How the run's messages are rendered (Letta's LettaRequestConfig)."""

    use_assistant_message: bool | None = None
    assistant_message_tool_name: str | None = None
    assistant_message_tool_kwarg: str | None = None
    include_return_message_types: list[MessageType] | None = None


class Run(ResponseModel):
    """A run (Letta's Run): one message request and the agent's work on it."""

    id: str
    agent_id: str
    status: RunStatus
    background: bool | None = None
    conversation_id: str | None = None
    stop_reason: StopReasonType | None = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    total_duration_ns: int | None = None
    metadata: JsonObject = Field(default_factory=dict)
    request_config: RequestConfig | None = None


class RunUsage(ResponseModel):
    """``GET /v1/runs/{id}/usage`` (Letta's UsageStatistics)."""

    completion_tokens: int
    prompt_tokens: int
    total_tokens: int


def run_out(record: RunRecord) -> Run:
    duration = None
    if record.completed_at is not None:
        duration = max(0, round((record.completed_at - record.created_at) * 1e9))
    config = {k: v for k, v in record.request.items() if k in RequestConfig.model_fields}
    return Run(
        id=record.id,
        agent_id=record.agent_id,
        status=record.status,  # type: ignore[arg-type]
        background=record.background,
        conversation_id=record.thread_id,
        stop_reason=record.stop_reason,  # type: ignore[arg-type]
        created_at=epoch_datetime(record.created_at),
        completed_at=epoch_datetime(record.completed_at) if record.completed_at else None,
        total_duration_ns=duration,
        request_config=RequestConfig.model_validate(config),
    )


def usage_out(record: RunRecord) -> RunUsage:
    usage = record.usage
    return RunUsage(
        completion_tokens=usage.completion_tokens,
        prompt_tokens=usage.prompt_tokens,
        total_tokens=usage.total_tokens,
    )
