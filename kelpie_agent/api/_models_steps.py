"""Steps in Letta's shapes: ``Step``, its metrics and its provider trace."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from kelpie_agent.agent import StepRecord

from ._models_common import JsonObject, RequestModel, ResponseModel, epoch_datetime
from ._models_messages import StopReasonType

__all__ = [
    "Feedback",
    "ProviderTrace",
    "Step",
    "StepFeedback",
    "StepMetrics",
    "metrics_out",
    "step_out",
    "trace_out",
]

Feedback = Literal["positive", "negative"]


class Step(ResponseModel):
    """One step of a run (Letta's Step): an LLM call and what it produced."""

    id: str
    agent_id: str | None = None
    run_id: str | None = None
    trace_id: str | None = None
    status: Literal["pending", "success", "failed", "cancelled"] | None = None
    stop_reason: StopReasonType | None = None
    model: str | None = None
    model_handle: str | None = None
    provider_name: str | None = None
    context_window_limit: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    feedback: Feedback | None = None
    tags: list[str] = Field(default_factory=list)


class StepMetrics(ResponseModel):
    """``GET /v1/steps/{id}/metrics``: the step's timing, in nanoseconds."""

    id: str
    agent_id: str | None = None
    run_id: str | None = None
    step_start_ns: int | None = None
    step_ns: int | None = None
    llm_request_start_ns: int | None = None
    llm_request_ns: int | None = None
    tool_execution_ns: int | None = None


class ProviderTrace(ResponseModel):
    """``GET /v1/steps/{id}/trace``: what Kelpie kept of the step's provider exchange."""

    id: str
    step_id: str
    agent_id: str
    run_id: str
    call_type: str = "agent_step"
    source: str = "kelpie"
    request_json: JsonObject
    response_json: JsonObject
    created_at: datetime | None = None


class StepFeedback(RequestModel):
    """``PATCH /v1/steps/{id}/feedback`` (Letta's feedback body)."""

    feedback: Feedback | None = None
    tags: list[str] | None = None


def step_out(step: StepRecord) -> Step:
    return Step(
        id=step.id,
        agent_id=step.agent_id,
        run_id=step.run_id,
        trace_id=step.run_id,  # a run is a trace (docs/http-api.md, "Steps and traces")
        status=step.status,  # type: ignore[arg-type]
        stop_reason=step.stop_reason,  # type: ignore[arg-type]
        model=step.model,
        model_handle=step.model_handle,
        provider_name=step.model_handle.split("/", 1)[0] if "/" in step.model_handle else None,
        context_window_limit=step.context_window,
        prompt_tokens=step.prompt_tokens,
        completion_tokens=step.completion_tokens,
        total_tokens=step.total_tokens,
        feedback=step.feedback,  # type: ignore[arg-type]
        tags=list(step.tags),
    )


def metrics_out(step: StepRecord) -> StepMetrics:
    start = round(step.created_at * 1e9)
    return StepMetrics(
        id=step.id,
        agent_id=step.agent_id,
        run_id=step.run_id,
        step_start_ns=start,
        step_ns=step.step_ns,
        llm_request_start_ns=start,
        llm_request_ns=step.llm_request_ns,
    )


def trace_out(step: StepRecord) -> ProviderTrace:
    return ProviderTrace(
        id=f"trace-{step.id}",
        step_id=step.id,
        agent_id=step.agent_id,
        run_id=step.run_id,
        request_json=dict(step.request),
        response_json=dict(step.response),
        created_at=epoch_datetime(step.created_at),
    )
