"""The session checkpoint: where a run is, written in the same transaction as its messages.

A *session* is one run of the loop (one ``SendMessage``). Its checkpoint (``session/<agent>``)
records the iteration, the tool calls of the step in progress and which of them completed (with
what outcome), the pause state, the counters behind the loop's budgets, and the stop reason
once the run ends. After a crash, the next activation reads it and resumes: completed calls are
never executed again (docs/agent.md, "Checkpoints and recovery").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from ._messages import LettaUsage

__all__ = ["PendingCall", "SessionCheckpoint"]


@attrs.frozen
class PendingCall:
    """A tool call of the step in progress, and once ``done``, how it went."""

    id: str  # the LLM's tool_call_id
    name: str
    arguments: str
    message_id: str  # the tool_call_message that carries it
    done: bool = False
    status: str | None = None  # "success" or "error"
    heartbeat: bool = False  # memgpt: the call asked for a heartbeat
    terminal: bool = False  # ended the run (send_message, exit_loop rule, memory_finish_edits)
    refused: bool = False  # never ran: invalid, unknown, repeated or over budget
    approval: str | None = None  # None (none needed), "requested", "approved" or "denied"
    reason: str | None = None  # the client's reason for a denial
    client_return: str | None = None  # a result the client gave for a call it ran itself
    client_status: str | None = None  # that result's status ("success" or "error")


def _calls(value: Iterable[PendingCall]) -> tuple[PendingCall, ...]:
    return tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


def _pairs(value: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(k), int(v)) for k, v in value))


def _prefill(value: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in value)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _allowed(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class SessionCheckpoint:
    """The state of one run after its last committed transaction."""

    session_id: str
    agent_id: str
    max_steps: int
    status: Literal["running", "done"] = "running"
    iteration: int = 0  # steps completed
    step_id: str | None = None  # the step whose tool calls are pending
    pending: tuple[PendingCall, ...] = attrs.field(default=(), converter=_calls)
    stop_reason: str | None = None
    paused_until: float | None = None  # heartbeats paused until then (epoch seconds)
    usage: LettaUsage = attrs.field(factory=LettaUsage)
    tool_calls: int = 0  # tool calls executed this run (the budget)
    call_counts: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_pairs)
    tool_counts: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_pairs)
    invalid_steps: int = 0  # consecutive steps whose calls were all refused
    empty_responses: int = 0
    nudges: int = 0  # no-tool-call reminders used (memgpt)
    first_seq: int = 0  # the run's first message
    started_at: float = 0.0
    updated_at: float = 0.0
    transferred_to: str | None = None
    transferred_from: str | None = None
    error: str | None = None  # what went wrong, for llm_api_error and error stops
    tool_history: tuple[str, ...] = attrs.field(default=(), converter=_names)  # called
    last_return: str | None = None  # the last call's packaged result (conditional rules)
    # the tools the rules allow in the step whose calls are pending (None: every tool)
    allowed: tuple[str, ...] | None = attrs.field(default=None, converter=_allowed)
    prefill: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_prefill)
    thread_id: str | None = None  # the conversation the run is in (None: the agent's own)
    background: bool = False  # started in background mode (it outlives its request)
    request: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    steps: tuple[str, ...] = attrs.field(default=(), converter=_strings)  # the run's step ids

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def awaiting_approval(self) -> bool:
        """The run stopped on calls that wait for a client's approval."""
        return self.stop_reason == "requires_approval" and any(
            c.approval == "requested" and not c.done for c in self.pending
        )

    @property
    def undone(self) -> tuple[PendingCall, ...]:
        return tuple(call for call in self.pending if not call.done)

    def count(self, table: Literal["call_counts", "tool_counts"], key: str) -> int:
        pairs: tuple[tuple[str, int], ...] = getattr(self, table)
        return dict(pairs).get(key, 0)

    def bump(self, table: Literal["call_counts", "tool_counts"], key: str) -> SessionCheckpoint:
        pairs: tuple[tuple[str, int], ...] = getattr(self, table)
        counts = dict(pairs)
        counts[key] = counts.get(key, 0) + 1
        if table == "call_counts":
            return attrs.evolve(self, call_counts=tuple(counts.items()))
        return attrs.evolve(self, tool_counts=tuple(counts.items()))

    def complete(self, call: PendingCall) -> SessionCheckpoint:
        """This checkpoint with ``call`` (same id) replaced by its completed version."""
        return attrs.evolve(
            self, pending=tuple(call if c.id == call.id else c for c in self.pending)
        )
