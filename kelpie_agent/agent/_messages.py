"""Letta's message types, as stored and as streamed.

One stored record per Letta message (``message_type`` tells them apart), so the HTTP layer
renders them without regrouping: ``letta_json(message)`` is the exact JSON Letta's SDK parses.
A step's reasoning/assistant text and its tool calls share a ``step_id``; that is how the prompt
builder puts them back into one assistant turn for the LLM.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal, TypeAlias

import attrs

__all__ = [
    "AgentMessage",
    "ApprovalDecision",
    "ApprovalRequestMessage",
    "ApprovalResponseMessage",
    "AssistantMessage",
    "LettaStopReason",
    "LettaUsage",
    "ReasoningMessage",
    "StreamEvent",
    "SystemMessage",
    "ToolCallInfo",
    "ToolCallMessage",
    "ToolReturnMessage",
    "UserMessage",
    "iso_date",
    "letta_json",
    "message_text",
    "render_messages",
]


def iso_date(epoch: float) -> str:
    """Epoch seconds as an ISO 8601 UTC timestamp (what Letta's ``date`` fields carry)."""
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.UTC).isoformat()


@attrs.frozen(kw_only=True)
class _Base:
    id: str
    date: float
    seq: int = 0  # position in the agent's history (storage order); 0 for stream deltas
    run_id: str | None = None
    step_id: str | None = None
    name: str | None = None
    otid: str | None = None


@attrs.frozen(kw_only=True)
class SystemMessage(_Base):
    """A system message: sent as input (``kind`` ``input``), or a thread's stored system
    prompt (``prompt``: its first message, rewritten in place, never sent as a turn; see
    ``_boot``)."""

    message_type: ClassVar[str] = "system_message"
    content: str
    kind: Literal["input", "prompt"] = "input"


@attrs.frozen(kw_only=True)
class UserMessage(_Base):
    """A user turn. ``kind`` marks hidden turns the loop adds itself: ``heartbeat``
    (``{"type": "heartbeat", ...}``) and ``alert`` (``{"type": "system_alert", ...}``); ``summary``
    is a compaction's summary of the messages it took out of context (a system alert too);
    ``login`` is the login event of a new agent's first messages (``_boot``)."""

    message_type: ClassVar[str] = "user_message"
    content: str
    kind: Literal["input", "heartbeat", "alert", "summary", "login"] = "input"


@attrs.frozen(kw_only=True)
class AssistantMessage(_Base):
    message_type: ClassVar[str] = "assistant_message"
    content: str


@attrs.frozen(kw_only=True)
class ReasoningMessage(_Base):
    message_type: ClassVar[str] = "reasoning_message"
    reasoning: str


@attrs.frozen
class ToolCallInfo:
    """``tool_call`` of a tool_call_message; in stream deltas ``name`` is only in the first."""

    name: str | None
    arguments: str
    tool_call_id: str


@attrs.frozen(kw_only=True)
class ToolCallMessage(_Base):
    message_type: ClassVar[str] = "tool_call_message"
    tool_call: ToolCallInfo


def _lines(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(kw_only=True)
class ToolReturnMessage(_Base):
    """A tool's result: ``tool_return`` is the packaged ``{"status", "message", "time"}``
    text the LLM also sees; ``name`` is the tool's name."""

    message_type: ClassVar[str] = "tool_return_message"
    tool_return: str
    status: Literal["success", "error"]
    tool_call_id: str
    stdout: tuple[str, ...] | None = attrs.field(default=None, converter=_lines)
    stderr: tuple[str, ...] | None = attrs.field(default=None, converter=_lines)


@attrs.frozen(kw_only=True)
class ApprovalRequestMessage(ToolCallMessage):
    """A tool call that waits for a client's approval (a ``requires_approval`` rule, or a
    tool that requires approval by default). It is a tool call in every other respect: the
    prompt shows it as one, and its result (run, denied or given by the client) answers it."""

    message_type: ClassVar[str] = "approval_request_message"


@attrs.frozen
class ApprovalDecision:
    """The client's answer for one call: approved, denied (with a reason), or, for a call
    the client ran itself, its result (``tool_return``, ``status``)."""

    tool_call_id: str
    approve: bool
    reason: str | None = None
    tool_return: str | None = None
    status: Literal["success", "error"] | None = None


def _decisions(value: Iterable[ApprovalDecision]) -> tuple[ApprovalDecision, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ApprovalResponseMessage(_Base):
    """The client's approvals and denials of the calls a run stopped on (not shown to the
    model: the calls' results are)."""

    message_type: ClassVar[str] = "approval_response_message"
    approvals: tuple[ApprovalDecision, ...] = attrs.field(converter=_decisions)
    approval_request_id: str | None = None

    @property
    def content(self) -> str:
        """The decisions as text (what search and checkers read)."""
        return "; ".join(
            f"{a.tool_call_id}: {'approved' if a.approve else 'denied'}"
            + (f" ({a.reason})" if a.reason else "")
            for a in self.approvals
        )


AgentMessage: TypeAlias = (
    SystemMessage
    | UserMessage
    | AssistantMessage
    | ReasoningMessage
    | ToolCallMessage
    | ToolReturnMessage
    | ApprovalResponseMessage
)


@attrs.frozen
class LettaStopReason:
    """Why a run stopped (the stream's ``stop_reason`` frame)."""

    message_type: ClassVar[str] = "stop_reason"
    stop_reason: str


@attrs.frozen
class LettaUsage:
    """Tokens and steps of one run (the stream's ``usage_statistics`` frame)."""

    message_type: ClassVar[str] = "usage_statistics"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    step_count: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, prompt: int, completion: int, steps: int = 0) -> LettaUsage:
        return LettaUsage(
            self.prompt_tokens + prompt,
            self.completion_tokens + completion,
            self.step_count + steps,
        )


StreamEvent: TypeAlias = AgentMessage | LettaStopReason | LettaUsage


def message_text(message: AgentMessage) -> str:
    """The human-readable text of a message (for search and display)."""
    if isinstance(message, SystemMessage | UserMessage | AssistantMessage):
        return message.content
    if isinstance(message, ReasoningMessage):
        return message.reasoning
    if isinstance(message, ToolCallMessage):
        return f"{message.tool_call.name}({message.tool_call.arguments})"
    if isinstance(message, ApprovalResponseMessage):
        return message.content
    return message.tool_return


def _send_message_text(call: ToolCallInfo) -> str | None:
    try:
        args = json.loads(call.arguments)
    except ValueError:
        return None
    message = args.get("message") if isinstance(args, dict) else None
    return message if isinstance(message, str) else None


def render_messages(
    messages: Sequence[AgentMessage], *, use_assistant_message: bool = True
) -> list[AgentMessage]:
    """Messages as Letta shows them. With ``use_assistant_message`` a ``send_message`` call
    becomes an ``assistant_message`` carrying its text (same id), and its successful tool
    return (a formality) is hidden, as Letta does."""
    if not use_assistant_message:
        return list(messages)
    out: list[AgentMessage] = []
    for message in messages:
        if isinstance(message, ToolCallMessage) and message.tool_call.name == "send_message":
            text = _send_message_text(message.tool_call)
            if text is not None:
                out.append(
                    AssistantMessage(
                        id=message.id,
                        date=message.date,
                        seq=message.seq,
                        run_id=message.run_id,
                        step_id=message.step_id,
                        otid=message.otid,
                        content=text,
                    )
                )
                continue
        if (
            isinstance(message, ToolReturnMessage)
            and message.name == "send_message"
            and message.status == "success"
        ):
            continue
        out.append(message)
    return out


def letta_json(event: StreamEvent) -> dict[str, Any]:
    """The JSON object Letta's SDK parses for a message or stream frame."""
    if isinstance(event, LettaStopReason):
        return {"message_type": "stop_reason", "stop_reason": event.stop_reason}
    if isinstance(event, LettaUsage):
        return {
            "message_type": "usage_statistics",
            "prompt_tokens": event.prompt_tokens,
            "completion_tokens": event.completion_tokens,
            "total_tokens": event.total_tokens,
            "step_count": event.step_count,
        }
    out: dict[str, Any] = {
        "id": event.id,
        "date": iso_date(event.date),
        "message_type": event.message_type,
        "otid": event.otid,
        "name": event.name,
        "run_id": event.run_id,
        "step_id": event.step_id,
        "seq_id": event.seq or None,
    }
    if isinstance(event, SystemMessage | UserMessage | AssistantMessage):
        out["content"] = event.content
    elif isinstance(event, ReasoningMessage):
        out["reasoning"] = event.reasoning
    elif isinstance(event, ToolCallMessage):
        call = event.tool_call
        out["tool_call"] = {
            "name": call.name,
            "arguments": call.arguments,
            "tool_call_id": call.tool_call_id,
        }
        if isinstance(event, ApprovalRequestMessage):
            out["tool_calls"] = [dict(out["tool_call"])]
    elif isinstance(event, ApprovalResponseMessage):
        out["approval_request_id"] = event.approval_request_id
        out["approvals"] = [_approval_json(a) for a in event.approvals]
        first = event.approvals[0] if event.approvals else None
        out["approve"] = first.approve if first is not None else None
        out["reason"] = first.reason if first is not None else None
    else:
        out["tool_return"] = event.tool_return
        out["status"] = event.status
        out["tool_call_id"] = event.tool_call_id
        out["stdout"] = list(event.stdout) if event.stdout is not None else None
        out["stderr"] = list(event.stderr) if event.stderr is not None else None
    return out


def _approval_json(decision: ApprovalDecision) -> dict[str, Any]:
    if decision.tool_return is not None:
        return {
            "type": "tool",
            "tool_call_id": decision.tool_call_id,
            "tool_return": decision.tool_return,
            "status": decision.status or "success",
        }
    return {
        "type": "approval",
        "tool_call_id": decision.tool_call_id,
        "approve": decision.approve,
        "reason": decision.reason,
    }
