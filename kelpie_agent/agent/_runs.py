"""Runs as records: what a run was, and which run an input's ``otid`` started.

A *run* is one ``SendMessage`` (Letta's Run). Its checkpoint (``session/<thread>``) is the
truth while it goes on; with every checkpoint write the agent also writes the run's record
(``run/<run_id>``), so a run can be looked up by id after later runs replaced the checkpoint,
listed (``runs/<agent>/<created>/<run_id>``, an index written once, with the input), and
followed from any node. The first input of a run records its ``otid``
(``otid/<thread>/<digest>``), in the same transaction, so a request retried with that otid,
however much later, is answered with the run it started instead of running again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ._checkpoint import SessionCheckpoint
from ._messages import LettaUsage

__all__ = [
    "FAILED_STOPS",
    "OtidRecord",
    "RunRecord",
    "run_record",
    "run_status",
]

# Stop reasons that make a run "failed", as Letta's ``StopReasonType.run_status`` maps them
# (letta/schemas/letta_stop_reason.py): the loop's errors, the model's failures and its
# unusable answers, and running out of tokens. A run cancelled is "cancelled"; every other
# finished run ("end_turn", "max_steps", "tool_rule", "requires_approval") "completed".
FAILED_STOPS = (
    "error",
    "llm_api_error",
    "invalid_llm_response",
    "invalid_tool_call",
    "no_tool_call",
    "max_tokens_exceeded",
    "context_window_overflow_in_system_prompt",
    "insufficient_credits",
)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class OtidRecord:
    """The run whose first input carried ``otid``, and that input's position."""

    otid: str
    run_id: str
    seq: int


def run_status(cp: SessionCheckpoint) -> str:
    """Letta's run status for a checkpoint: running, completed, failed or cancelled."""
    if cp.running:
        return "running"
    if cp.stop_reason == "cancelled":
        return "cancelled"
    if cp.stop_reason in FAILED_STOPS:
        return "failed"
    return "completed"


@attrs.frozen
class RunRecord:
    """A run as its last checkpoint left it (``status``: Letta's run status)."""

    id: str
    agent_id: str
    status: str
    stop_reason: str | None = None
    usage: LettaUsage = attrs.field(factory=LettaUsage)
    error: str | None = None
    first_seq: int = 0
    thread_id: str | None = None  # the conversation; None for the agent's own history
    background: bool = False
    request: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    steps: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    created_at: float = 0.0
    updated_at: float = 0.0
    completed_at: float | None = None

    @property
    def running(self) -> bool:
        return self.status == "running"


def run_record(cp: SessionCheckpoint) -> RunRecord:
    """The record of the run ``cp`` is the checkpoint of."""
    return RunRecord(
        id=cp.session_id,
        agent_id=cp.agent_id,
        status=run_status(cp),
        stop_reason=cp.stop_reason,
        usage=cp.usage,
        error=cp.error,
        first_seq=cp.first_seq,
        thread_id=cp.thread_id,
        background=cp.background,
        request=cp.request,
        steps=cp.steps,
        created_at=cp.started_at,
        updated_at=cp.updated_at,
        completed_at=None if cp.running else cp.updated_at,
    )
