"""The message-sending options Kelpie has no machinery for, refused when they ask for more
than Letta's defaults (a 422 naming the field), never silently ignored.

Shared by every route that sends a message (an agent's ``/messages``, ``/stream``, ``/async``
and a conversation's ``/messages``): a field set to what Letta does by default is accepted,
since that is what Kelpie does; anything else is refused.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, WithJsonSchema, field_validator

from ._models_common import RequestModel

__all__ = ["ResetRequest", "UnsupportedSendOptions"]

_NOT_SUPPORTED = "not supported by this server"


# The schema states exactly what is accepted (the API fuzzer checks it): only the default.
def _only(value: object) -> WithJsonSchema:
    return WithJsonSchema({"const": value, "description": f"{_NOT_SUPPORTED} unless {value!r}"})


def _none() -> WithJsonSchema:
    return WithJsonSchema({"type": "null", "description": f"{_NOT_SUPPORTED}: leave it out"})


class UnsupportedSendOptions(BaseModel):
    """Mixed into the send requests (``RequestModel`` subclasses) before their own fields."""

    override_model: Annotated[str | None, _none()] = None
    override_system: Annotated[str | None, _none()] = None
    client_tools: Annotated[list[dict[str, Any]] | None, _none()] = None
    client_skills: Annotated[list[dict[str, Any]] | None, _none()] = None
    return_logprobs: Annotated[bool, _only(False)] = False
    return_token_ids: Annotated[bool, _only(False)] = False
    top_logprobs: Annotated[int | None, _none()] = None
    include_compaction_messages: Annotated[bool, _only(False)] = False
    enable_thinking: Annotated[str | None, _none()] = None
    # Letta's defaults: the assistant's text is the ``message`` argument of send_message
    assistant_message_tool_name: Annotated[str, _only("send_message")] = "send_message"
    assistant_message_tool_kwarg: Annotated[str, _only("message")] = "message"

    @field_validator(
        "override_model", "override_system", "client_tools", "client_skills", "enable_thinking"
    )
    @classmethod
    def _unsupported(cls, value: object) -> object:
        if value is not None:
            raise ValueError(_NOT_SUPPORTED)
        return value

    @field_validator("return_logprobs", "return_token_ids", "include_compaction_messages")
    @classmethod
    def _unsupported_flag(cls, value: bool) -> bool:
        if value:
            raise ValueError(_NOT_SUPPORTED)
        return value

    @field_validator("top_logprobs")
    @classmethod
    def _no_logprobs(cls, value: object) -> object:
        if value is not None:
            raise ValueError("log-probabilities are not supported by this server")
        return value

    @field_validator("assistant_message_tool_name")
    @classmethod
    def _send_message(cls, value: str) -> str:
        if value != "send_message":
            raise ValueError("only 'send_message' is supported (Letta's default)")
        return value

    @field_validator("assistant_message_tool_kwarg")
    @classmethod
    def _message_kwarg(cls, value: str) -> str:
        if value != "message":
            raise ValueError("only 'message' is supported (Letta's default)")
        return value


class ResetRequest(RequestModel):
    """``PATCH /v1/agents/{id}/reset-messages``: Kelpie's reset leaves the history empty, as
    Letta's does by default; ``add_default_initial_messages: true`` is refused."""

    add_default_initial_messages: Annotated[bool, _only(False)] = False

    @field_validator("add_default_initial_messages")
    @classmethod
    def _no_initial_messages(cls, value: bool) -> bool:
        if value:
            raise ValueError(_NOT_SUPPORTED)
        return value
