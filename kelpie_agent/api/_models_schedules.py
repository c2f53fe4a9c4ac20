"""Scheduled messages in Letta's shapes (``agents.schedule``): the create body, the
``ScheduledMessage`` answered by retrieve and list, and the create and delete answers.

``schedule`` is ``{"type": "one-time", "scheduled_at": <epoch ms>}`` (``type`` may be left
out) or ``{"type": "recurring", "cron_expression": "<five fields, UTC>"}``. One model for
both, so that a missing field is named (``body.schedule.cron_expression: Field required``)
rather than the union's branches.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from kelpie_agent.agent import InputMessage, ScheduledMessage
from kelpie_agent.agent._schedules import iso

from ._models_common import NOT_BLANK, NonBlank, RequestModel, ResponseModel
from ._models_messages import MAX_STEPS, SOME_TEXT, TextContent

__all__ = [
    "ScheduleCreate",
    "ScheduleCreateResponse",
    "ScheduleDeleteResponse",
    "ScheduleListResponse",
    "ScheduledMessageOut",
    "scheduled_out",
]

ReturnType = Literal[
    "system_message",
    "user_message",
    "assistant_message",
    "reasoning_message",
    "hidden_reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "approval_request_message",
    "approval_response_message",
]


class ScheduleMessage(RequestModel):
    """One message to send (Letta's ``MessageCreate``; text content only)."""

    role: Literal["user", "assistant", "system"]
    content: NonBlank | list[TextContent] = Field(json_schema_extra=SOME_TEXT)
    name: str | None = Field(default=None, max_length=200)
    otid: str | None = Field(default=None, max_length=200)
    sender_id: str | None = Field(default=None, max_length=200)
    type: Literal["message"] | None = None

    @model_validator(mode="after")
    def _some_text(self) -> ScheduleMessage:
        if not re.search(NOT_BLANK, self.text()):  # as the schema says (SOME_TEXT)
            raise ValueError("at content: every part is blank")
        return self

    def text(self) -> str:
        c = self.content
        return c if isinstance(c, str) else "\n".join(part.text for part in c)

    def to_input(self) -> InputMessage:
        return InputMessage(self.role, self.text(), name=self.name, otid=self.otid)


def _ci(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" for c in word)


def _cron_field(number: str) -> str:
    item = rf"(\*|({number})(-({number}))?)(/0*[1-9][0-9]*)?"
    return rf"{item}(,{item})*"


# The syntax and ranges ``agent._cron.parse_cron`` accepts, for the schema (the fuzzer holds
# the schema exact); the parser still refuses reversed ranges and days that never come.
_MONTHS = "|".join(
    _ci(m)
    for m in ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
)
_DAYS = "|".join(_ci(d) for d in ["sun", "mon", "tue", "wed", "thu", "fri", "sat"])
_SPACE = r"[ \t\n\r\f\v]"
CRON_PATTERN = (
    f"^{_SPACE}*"
    + f"{_SPACE}+".join(
        f"({_cron_field(number)})"
        for number in (
            r"0*([0-9]|[1-5][0-9])",
            r"0*([0-9]|1[0-9]|2[0-3])",
            r"0*([1-9]|[12][0-9]|3[01])",
            rf"0*([1-9]|1[0-2])|{_MONTHS}",
            rf"0*[0-7]|{_DAYS}",
        )
    )
    + f"{_SPACE}*$"
)


MAX_SCHEDULED_AT = 253_402_300_799_999
"""The last millisecond of year 9999 (epoch ms): a later moment has no date to show, so it is
refused as the field's error, not answered 500 (found by the API fuzzer, session 15)."""


class ScheduleSpec(RequestModel):
    # exact schema: a recurring schedule needs its cron expression, a one-time one its moment
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"type": {"const": "recurring"}}, "required": ["type"]},
            "then": {
                "required": ["cron_expression"],
                "properties": {"cron_expression": {"type": "string"}},
            },
            "else": {
                "required": ["scheduled_at"],
                "properties": {"scheduled_at": {"type": "number", "maximum": MAX_SCHEDULED_AT}},
            },
        }
    )

    type: Literal["one-time", "recurring"] = "one-time"
    scheduled_at: float | None = Field(default=None, ge=0, le=MAX_SCHEDULED_AT)  # epoch ms
    cron_expression: str | None = Field(
        default=None, min_length=1, max_length=200, json_schema_extra={"pattern": CRON_PATTERN}
    )

    @model_validator(mode="after")
    def _complete(self) -> ScheduleSpec:
        if self.type == "one-time" and self.scheduled_at is None:
            raise ValueError("at scheduled_at: Field required")
        if self.type == "recurring" and self.cron_expression is None:
            raise ValueError("at cron_expression: Field required")
        return self

    def to_mapping(self) -> dict[str, object]:
        if self.type == "recurring":
            return {"type": "recurring", "cron_expression": self.cron_expression}
        return {"type": "one-time", "scheduled_at": self.scheduled_at}


class ScheduleCreate(RequestModel):
    messages: list[ScheduleMessage] = Field(min_length=1, max_length=100)
    schedule: ScheduleSpec
    callback_url: str | None = Field(
        default=None,
        description="Not supported: Kelpie makes no outbound callbacks (422)",
        json_schema_extra={"type": "null"},
    )
    include_return_message_types: list[ReturnType] | None = None
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)

    @model_validator(mode="after")
    def _no_callback(self) -> ScheduleCreate:
        if self.callback_url is not None:
            raise ValueError("at callback_url: not supported (Kelpie makes no outbound calls)")
        return self


class MessageOut(ResponseModel):
    content: str
    role: Literal["user", "assistant", "system"]
    name: str | None = None
    otid: str | None = None
    sender_id: str | None = None
    type: Literal["message"] = "message"


class ScheduledPayload(ResponseModel):
    messages: list[MessageOut]
    callback_url: str | None = None
    include_return_message_types: list[ReturnType] | None = None
    max_steps: float | None = None


class OneTime(ResponseModel):
    scheduled_at: float
    type: Literal["one-time"] = "one-time"


class Recurring(ResponseModel):
    cron_expression: str
    type: Literal["recurring"] = "recurring"


class ScheduledMessageOut(ResponseModel):
    id: str
    agent_id: str
    message: ScheduledPayload
    next_scheduled_time: str | None = None
    schedule: OneTime | Recurring


class ScheduleListResponse(ResponseModel):
    has_next_page: bool
    scheduled_messages: list[ScheduledMessageOut]


class ScheduleCreateResponse(ResponseModel):
    id: str
    next_scheduled_at: str | None = None


class ScheduleDeleteResponse(ResponseModel):
    success: Literal[True] = True


def scheduled_out(record: ScheduledMessage) -> ScheduledMessageOut:
    schedule: OneTime | Recurring
    if record.cron is not None:
        schedule = Recurring(cron_expression=record.cron)
    else:
        schedule = OneTime(scheduled_at=record.scheduled_at or record.next_at * 1000)
    return ScheduledMessageOut(
        id=record.id,
        agent_id=record.agent_id,
        message=ScheduledPayload(
            messages=[
                MessageOut(content=m.content, role=m.role, name=m.name, otid=m.otid)  # type: ignore[arg-type]
                for m in record.messages
            ],
            include_return_message_types=list(record.include_return_message_types)  # type: ignore[arg-type]
            if record.include_return_message_types
            else None,
            max_steps=record.max_steps,
        ),
        next_scheduled_time=iso(record.next_at),
        schedule=schedule,
    )
