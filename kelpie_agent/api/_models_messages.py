"""Messages in Letta's shapes: the send request, the six message types, LettaResponse, Run.

Responses are built with :func:`kelpie_agent.agent.letta_json` (the exact JSON the SDK parses)
and validated against these models, which also give the OpenAPI schema its message union
(told apart by ``message_type``, as the SDK does).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from kelpie_agent.agent import ApprovalDecision, InputMessage

from ._models_common import NOT_BLANK, Id, NonBlank, RequestModel, ResponseModel
from ._models_unsupported import UnsupportedSendOptions

__all__ = [
    "MESSAGE_TYPES",
    "SOME_TEXT",
    "AssistantMessage",
    "CancelRequest",
    "InputMessageModel",
    "LettaMessage",
    "LettaResponse",
    "MessageRequest",
    "ReasoningMessage",
    "SendRequest",
    "StopReason",
    "SystemMessage",
    "TextContent",
    "ToolCall",
    "ToolCallMessage",
    "ToolReturnMessage",
    "Usage",
    "UserMessage",
]

MAX_STEPS = 1000

MessageType = Literal[
    "system_message",
    "user_message",
    "assistant_message",
    "reasoning_message",
    "hidden_reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "approval_request_message",
    "approval_response_message",
    "summary_message",
    "event_message",
]
MESSAGE_TYPES: tuple[str, ...] = MessageType.__args__  # type: ignore[attr-defined]

StopReasonType = Literal[
    "end_turn",
    "error",
    "llm_api_error",
    "invalid_llm_response",
    "invalid_tool_call",
    "max_steps",
    "max_tokens_exceeded",
    "no_tool_call",
    "tool_rule",
    "cancelled",
    "requires_approval",
]


# -- requests ------------------------------------------------------------------------------------
class TextContent(RequestModel):
    """One content part; only text is supported."""

    type: Literal["text"] = "text"
    text: str


# The parts of a content list, joined by newlines, must not be blank: one part must not be.
SOME_TEXT: JsonDict = {
    "contains": {"properties": {"text": {"pattern": NOT_BLANK}}, "required": ["text"]}
}


def _joined(content: str | list[TextContent]) -> str:
    return content if isinstance(content, str) else "\n".join(part.text for part in content)


def _present(*names: str) -> JsonDict:
    """The schema of an object in which each of ``names`` is given and not null."""
    return {"required": list(names), "properties": {n: {"not": {"type": "null"}} for n in names}}


def _when_type(value: str, then: JsonDict, otherwise: JsonDict) -> JsonDict:
    """``then`` applies when ``type`` is ``value``, ``otherwise`` when not (the validators)."""
    return {
        "if": {"properties": {"type": {"const": value}}, "required": ["type"]},
        "then": then,
        "else": otherwise,
    }


class ApprovalItem(RequestModel):
    """One call's answer: ``approval`` (approve, reason) or ``tool`` (the client's result)."""

    model_config = ConfigDict(
        json_schema_extra=_when_type("tool", _present("tool_return", "status"), _present("approve"))
    )

    type: Literal["approval", "tool"] = "approval"
    tool_call_id: str = Field(min_length=1, max_length=200)
    approve: bool | None = None
    reason: str | None = None
    tool_return: str | list[TextContent] | None = None
    status: Literal["success", "error"] | None = None

    @model_validator(mode="after")
    def _complete(self) -> ApprovalItem:
        if self.type == "approval" and self.approve is None:
            raise ValueError("an approval needs approve (true or false)")
        if self.type == "tool" and (self.tool_return is None or self.status is None):
            raise ValueError("a tool result needs tool_return and status")
        return self

    def to_decision(self) -> ApprovalDecision:
        if self.type == "approval":
            assert self.approve is not None
            return ApprovalDecision(self.tool_call_id, self.approve, self.reason)
        ret = self.tool_return
        text = ret if isinstance(ret, str) else "\n".join(p.text for p in ret or ())
        return ApprovalDecision(self.tool_call_id, True, None, text, self.status)


class InputMessageModel(RequestModel):
    """One input message (Letta's ``MessageCreate``), or, with ``type: "approval"``, the
    client's answer to a run that stopped with ``requires_approval`` (Letta's
    ``ApprovalCreate``: ``approvals`` per call, or the legacy ``approve`` + ``reason`` for
    every call of ``approval_request_id``). One model, so a bad message's error names its
    field rather than the union's branches."""

    model_config = ConfigDict(
        json_schema_extra=_when_type(
            "approval",
            {
                "anyOf": [
                    {
                        "required": ["approvals"],
                        "properties": {"approvals": {"type": "array", "minItems": 1}},
                    },
                    _present("approve"),
                ]
            },
            _present("role", "content"),
        )
    )

    role: Literal["user", "system", "assistant"] | None = None
    content: NonBlank | list[TextContent] | None = Field(default=None, json_schema_extra=SOME_TEXT)
    name: str | None = None
    otid: NonBlank | None = Field(default=None, max_length=200)
    type: Literal["message", "approval"] | None = None
    approvals: list[ApprovalItem] | None = None
    approve: bool | None = None
    approval_request_id: str | None = Field(default=None, max_length=200)
    reason: str | None = Field(default=None, pattern=f"^$|{NOT_BLANK}")  # empty: no reason

    @model_validator(mode="after")
    def _complete(self) -> InputMessageModel:
        if self.type == "approval":
            if not self.approvals and self.approve is None:
                raise ValueError("an approval message needs approvals or approve")
            return self
        if self.role is None:
            raise ValueError("at role: Field required")
        if self.content is None:
            raise ValueError("at content: Field required")
        if not re.search(NOT_BLANK, self.text()):
            raise ValueError("content: every part is blank")
        return self

    def text(self) -> str:
        return _joined(self.content) if self.content is not None else ""

    def to_input(self) -> InputMessage:
        if self.type == "approval":
            return InputMessage(
                "approval",
                self.reason or "",
                otid=self.otid,
                approvals=tuple(a.to_decision() for a in self.approvals or ()),
                approval_request_id=self.approval_request_id,
                approve=None if self.approvals else self.approve,
            )
        assert self.role is not None
        return InputMessage(self.role, self.text(), name=self.name, otid=self.otid)


# Exactly one of messages and input, and messages not empty (MessageRequest._one_input).
_ONE_INPUT: list[Any] = [
    {
        "required": ["messages"],
        "properties": {"messages": {"type": "array", "minItems": 1}, "input": {"type": "null"}},
    },
    {
        "required": ["input"],
        "properties": {"input": {"not": {"type": "null"}}, "messages": {"type": "null"}},
    },
]


def _needs_streaming(flag: str, value: bool) -> JsonDict:
    """``flag`` set to ``value`` needs ``streaming: true`` (stream_only_problem)."""
    return {
        "if": {"properties": {flag: {"const": value}}, "required": [flag]},
        "then": {"properties": {"streaming": {"const": True}}, "required": ["streaming"]},
    }


class MessageRequest(RequestModel, UnsupportedSendOptions):
    """``POST /v1/agents/{id}/messages/stream`` and ``/async`` (and the base of
    :class:`SendRequest`)."""

    model_config = ConfigDict(json_schema_extra={"oneOf": _ONE_INPUT})

    messages: list[InputMessageModel] | None = None
    input: NonBlank | list[TextContent] | None = Field(default=None, json_schema_extra=SOME_TEXT)
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)
    streaming: bool = False
    stream_tokens: bool = False
    include_pings: bool = True
    use_assistant_message: bool = True
    include_return_message_types: list[MessageType] | None = None

    @model_validator(mode="after")
    def _one_input(self) -> MessageRequest:
        if (self.messages is None) == (self.input is None):
            raise ValueError("give exactly one of 'messages' and 'input'")
        if self.messages is not None and not self.messages:
            raise ValueError("'messages' must not be empty")
        return self

    @model_validator(mode="after")
    def _input_not_blank(self) -> MessageRequest:
        if self.input is not None and not re.search(NOT_BLANK, _joined(self.input)):
            raise ValueError("input: every part is blank")
        return self

    def inputs(self) -> tuple[InputMessage, ...]:
        if self.messages is not None:
            return tuple(m.to_input() for m in self.messages)
        assert self.input is not None
        text = (
            self.input
            if isinstance(self.input, str)
            else "\n".join(part.text for part in self.input)
        )
        return (InputMessage("user", text),)

    def stream_only_problem(self) -> tuple[str, str] | None:
        """For a JSON (non-streaming) request: the stream-only option set, if any, as (field,
        problem)."""
        if self.stream_tokens:
            return "body.stream_tokens", "stream_tokens=true requires streaming=true"
        if "include_pings" in self.model_fields_set and not self.include_pings:
            return "body.include_pings", "include_pings=false requires streaming=true"
        return None


class SendRequest(MessageRequest):
    """``POST /v1/agents/{id}/messages``: as :class:`MessageRequest`, and the stream-only
    options need ``streaming: true`` (a JSON answer has no tokens and no pings)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": _ONE_INPUT,
            "allOf": [
                _needs_streaming("stream_tokens", True),
                _needs_streaming("include_pings", False),
            ],
        }
    )


class CancelRequest(RequestModel):
    """``POST /v1/agents/{id}/messages/cancel``: every running run of the agent. Choosing
    runs (``run_ids``) is refused: this node asks all of them, not the chosen ones."""

    run_ids: list[Id] | None = None

    @field_validator("run_ids")
    @classmethod
    def _all_runs_only(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            raise ValueError("not supported: leave it out to cancel every run of the agent")
        return value


# -- messages ------------------------------------------------------------------------------------
class _Message(ResponseModel):
    id: str
    date: datetime
    otid: str | None = None
    name: str | None = None
    run_id: str | None = None
    step_id: str | None = None
    seq_id: int | None = None


class SystemMessage(_Message):
    message_type: Literal["system_message"] = "system_message"
    content: str


class UserMessage(_Message):
    message_type: Literal["user_message"] = "user_message"
    content: str


class AssistantMessage(_Message):
    message_type: Literal["assistant_message"] = "assistant_message"
    content: str


class ReasoningMessage(_Message):
    message_type: Literal["reasoning_message"] = "reasoning_message"
    reasoning: str


class ToolCall(ResponseModel):
    """A tool call; in token-stream deltas every field may be missing."""

    name: str | None = None
    arguments: str | None = None
    tool_call_id: str | None = None


class ToolCallMessage(_Message):
    message_type: Literal["tool_call_message"] = "tool_call_message"
    tool_call: ToolCall


class ToolReturnMessage(_Message):
    message_type: Literal["tool_return_message"] = "tool_return_message"
    tool_return: str
    status: Literal["success", "error"]
    tool_call_id: str
    stdout: list[str] | None = None
    stderr: list[str] | None = None


class ApprovalRequestMessage(_Message):
    message_type: Literal["approval_request_message"] = "approval_request_message"
    tool_call: ToolCall
    tool_calls: list[ToolCall] | None = None


class ApprovalAnswer(ResponseModel):
    type: Literal["approval", "tool"]
    tool_call_id: str
    approve: bool | None = None
    reason: str | None = None
    tool_return: str | None = None
    status: Literal["success", "error"] | None = None


class ApprovalResponseMessage(_Message):
    message_type: Literal["approval_response_message"] = "approval_response_message"
    approval_request_id: str | None = None
    approvals: list[ApprovalAnswer] | None = None
    approve: bool | None = None
    reason: str | None = None


LettaMessage = Annotated[
    SystemMessage
    | UserMessage
    | AssistantMessage
    | ReasoningMessage
    | ToolCallMessage
    | ToolReturnMessage
    | ApprovalRequestMessage
    | ApprovalResponseMessage,
    Field(discriminator="message_type"),
]


class StopReason(ResponseModel):
    message_type: Literal["stop_reason"] = "stop_reason"
    stop_reason: StopReasonType


class Usage(ResponseModel):
    message_type: Literal["usage_statistics"] = "usage_statistics"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    step_count: int = 0


class LettaResponse(ResponseModel):
    """The JSON answer of ``POST /v1/agents/{id}/messages``."""

    messages: list[LettaMessage]
    stop_reason: StopReason
    usage: Usage
