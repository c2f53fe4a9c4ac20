"""Steps as records (Letta's Step): one answered LLM call of a run and what it produced.

The loop writes a step's record (``step/<step_id>``) and the agent's index entry
(``steps/<agent>/<µs>/<number>/<step_id>``) in the transaction that stores the model's answer
(the step's messages and the run's checkpoint, whose ``steps`` lists the run's step ids in
order): a step is never stored without its messages, nor its messages without it. A step is
written for every LLM call that answered, so a run's step records, its checkpoint's ``steps``
and its usage's ``step_count`` always agree. A call that failed for good ends the run
(``llm_api_error``) without a step. Feedback is the one thing written later, by whoever calls
``steps.feedback.create`` (a read-modify-write of the record, outside the agent).

A step's *trace* is what Kelpie kept of the provider exchange: a summary of the request (model,
system prompt size, message count, tool names, max_tokens) and of the answer (stop reason,
usage, content kinds), not the full texts (docs/http-api.md, "Steps and traces").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from kelpie_agent.llm import LlmRequest, LlmResponse, TextBlock

from ._checkpoint import SessionCheckpoint
from ._models import AgentRecord

__all__ = ["FEEDBACKS", "STEP_STATUSES", "StepRecord", "step_record"]

FEEDBACKS = ("positive", "negative")
STEP_STATUSES = ("pending", "success", "failed", "cancelled")


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class StepRecord:
    """One step: the call's model and tokens, its timing, how it ended, its feedback."""

    id: str
    agent_id: str
    run_id: str
    thread_id: str | None = None  # the conversation (None: the agent's own history)
    number: int = 0  # the step's position in its run (0 first)
    model: str = ""  # the provider's model name
    model_handle: str = ""  # provider/model
    context_window: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: str = "success"  # Letta's: pending, success, failed, cancelled
    stop_reason: str | None = None  # set when the step ended the run
    message_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)  # written with it
    created_at: float = 0.0  # epoch seconds (Clock port): when the step started
    step_ns: int = 0  # the step, start to commit (Clock port)
    llm_request_ns: int = 0  # the model call(s), retries included
    attempts: int = 1  # LLM calls made for the answer (retries included)
    feedback: str | None = None  # "positive" or "negative"
    tags: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    request: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    response: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def llm_request_start_ns(self) -> int:
        return round(self.created_at * 1e9)


def _ns(seconds: float) -> int:
    return max(0, round(seconds * 1e9))


def step_record(
    *,
    step_id: str,
    agent: AgentRecord,
    cp: SessionCheckpoint,
    request: LlmRequest,
    response: LlmResponse,
    attempts: int,
    message_ids: Iterable[str],
    started: float,
    answered: float,
    committed: float,
) -> StepRecord:
    """The record of step ``step_id``: ``cp`` is the run's checkpoint the step commits (its
    ``steps`` already ends with the step), the times are Clock-port epoch seconds."""
    kinds = ["text" if isinstance(b, TextBlock) else "tool_call" for b in response.content]
    return StepRecord(
        id=step_id,
        agent_id=agent.id,
        run_id=cp.session_id,
        thread_id=cp.thread_id,
        number=len(cp.steps) - 1,
        model=agent.llm_model,
        model_handle=agent.model,
        context_window=agent.context_window,
        prompt_tokens=response.usage.input_tokens,
        completion_tokens=response.usage.output_tokens,
        stop_reason=None if cp.running else cp.stop_reason,
        message_ids=message_ids,
        created_at=started,
        step_ns=_ns(committed - started),
        llm_request_ns=_ns(answered - started),
        attempts=attempts,
        request={
            "model": request.model,
            "max_tokens": request.max_tokens,
            "system_chars": len(request.system),
            "messages": len(request.messages),
            "tools": [tool.name for tool in request.tools],
        },
        response={
            "id": response.id,
            "model": response.model,
            "stop_reason": response.stop_reason,
            "content": kinds,
            "usage": {
                "input_tokens": response.usage.input_tokens,
                "output_tokens": response.usage.output_tokens,
            },
        },
    )
