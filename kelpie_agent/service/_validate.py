"""Argument checks: each failure is an :class:`InvalidError` (422) naming the field."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.agent import (
    AGENT_TYPES,
    UPDATABLE_FIELDS,
    BlockCreate,
    CreateAgent,
    InputMessage,
    InvalidRequestError,
    ToolRule,
)
from kelpie_agent.agent._models import DEFAULT_BLOCK_LIMIT, check_id, check_label
from kelpie_agent.sandbox import agent_network

from ._errors import InvalidError

__all__ = [
    "MAX_PAGE",
    "NOT_BLANK",
    "block_create",
    "create_request",
    "ident",
    "input_messages",
    "int_at_least",
    "label",
    "metadata",
    "order",
    "page_limit",
    "tags",
    "text",
]

MAX_PAGE = 1000
# A text that must not be blank has a character other than ASCII whitespace; the API states the
# same pattern in its schema (the same in Python, JSON Schema's ECMA regexes and pydantic's).
NOT_BLANK = r"[^\t\n\v\f\r ]"
_NOT_BLANK = re.compile(NOT_BLANK)
_UPDATABLE = (*UPDATABLE_FIELDS, "tool_ids", "block_ids")


def ident(value: object, field: str) -> str:
    try:
        return check_id(value, field)
    except InvalidRequestError:
        raise InvalidError(field, f"not a valid id: {value!r}") from None


def label(value: object, field: str = "label") -> str:
    try:
        return check_label(value, field)
    except InvalidRequestError:
        raise InvalidError(
            field, f"a block label is 1-100 letters, digits, '_', '.' or '-', got {value!r}"
        ) from None


def int_at_least(value: object, field: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidError(field, f"must be an integer >= {low}, got {value!r}")
    if high is not None and value > high:
        raise InvalidError(field, f"must be at most {high}, got {value}")
    return value


def page_limit(value: object) -> int:
    return int_at_least(value, "limit", 0, MAX_PAGE)


def order(value: object) -> bool:
    """True for ``desc``."""
    if value not in ("asc", "desc"):
        raise InvalidError("order", f"must be 'asc' or 'desc', got {value!r}")
    return value == "desc"


def text(value: object, field: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidError(field, f"must be a string, got {type(value).__name__}")
    if not empty and not _NOT_BLANK.search(value):
        raise InvalidError(field, "must not be empty (or only spaces, tabs and newlines)")
    return value


def tags(value: object, field: str = "tags") -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidError(field, f"must be a list of strings, got {value!r}")
    out = tuple(value)
    for i, item in enumerate(out):
        if not isinstance(item, str):
            raise InvalidError(f"{field}[{i}]", f"must be a string, got {item!r}")
    return out


def metadata(value: object, field: str = "metadata") -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidError(field, "must be an object with string keys")
    return value


def number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidError(field, f"must be a finite number, got {value!r}")
    return float(value)


def block_create(spec: object, field: str) -> BlockCreate:
    if not isinstance(spec, BlockCreate):
        raise InvalidError(field, f"must be a BlockCreate, got {type(spec).__name__}")
    label(spec.label, f"{field}.label")
    text(spec.value, f"{field}.value", empty=True)
    text(spec.description, f"{field}.description", empty=True)
    metadata(spec.metadata, f"{field}.metadata")
    if spec.limit is not None:
        int_at_least(spec.limit, f"{field}.limit", 1)
    limit = DEFAULT_BLOCK_LIMIT if spec.limit is None else spec.limit
    if len(spec.value) > limit:
        raise InvalidError(
            f"{field}.value",
            f"has {len(spec.value)} characters, over the block's limit {limit}",
            status=400,
        )
    return spec


def _rules(value: object, field: str) -> tuple[ToolRule, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidError(field, "must be a list of tool rules")
    out = tuple(value)
    for i, rule in enumerate(out):
        if not isinstance(rule, ToolRule):
            raise InvalidError(f"{field}[{i}]", f"must be a ToolRule, got {rule!r}")
    return out


def _agent_field(name: str, value: Any, field: str) -> Any:
    """One field of CreateAgent/UpdateAgent, checked (``field`` names it in errors)."""
    if name in ("name", "model"):
        return text(value, field)
    if name in ("system", "description", "timezone"):
        return text(value, field, empty=name != "timezone")
    if name == "embedding":
        return None if value is None else text(value, field)
    if name == "context_window":
        return int_at_least(value, field, 256)
    if name == "max_tokens":
        return int_at_least(value, field, 1)
    if name == "tags":
        return tags(value, field)
    if name == "metadata":
        checked = metadata(value, field)
        try:
            agent_network(checked)  # metadata.sandbox_allow_hosts: host patterns
        except ValueError as error:
            field_name, _, problem = str(error).partition(": ")
            raise InvalidError(f"{field}.{field_name.split('.', 1)[1]}", problem) from None
        return checked
    if name == "tool_rules":
        return _rules(value, field)
    if name in ("tool_ids", "block_ids"):
        ids = tags(value, field)
        for i, item in enumerate(ids):
            ident(item, f"{field}[{i}]")
        return ids
    if name == "agent_type":
        if value not in AGENT_TYPES:
            raise InvalidError(field, f"must be one of {', '.join(AGENT_TYPES)}, got {value!r}")
        return value
    return value


def create_request(request: object) -> CreateAgent:
    if not isinstance(request, CreateAgent):
        raise InvalidError("request", f"must be a CreateAgent, got {type(request).__name__}")
    for name in ("agent_type", *(f for f in _UPDATABLE if f != "name")):
        _agent_field(name, getattr(request, name), name)
    if request.name != "":
        text(request.name, "name")
    labels: list[str] = []
    for i, spec in enumerate(request.memory_blocks):
        block_create(spec, f"memory_blocks[{i}]")
        if spec.label in labels:
            raise InvalidError(
                f"memory_blocks[{i}].label", f"{spec.label!r} appears twice", status=400
            )
        labels.append(spec.label)
    if request.initial_messages is not None:
        input_messages(request.initial_messages, "initial_messages", allow_empty=True)
    return request


def agent_changes(changes: object) -> dict[str, Any]:
    if not isinstance(changes, Mapping):
        raise InvalidError("changes", "must be a mapping of field names to new values")
    unknown = sorted(set(changes) - set(_UPDATABLE))
    if unknown:
        raise InvalidError(
            unknown[0], f"cannot be updated (updatable: {', '.join(sorted(_UPDATABLE))})"
        )
    return {name: _agent_field(name, value, name) for name, value in changes.items()}


def input_messages(
    messages: object, field: str = "messages", *, allow_empty: bool = False
) -> tuple[InputMessage, ...]:
    """Check input messages; in a request (not ``initial_messages``), the first may be an
    approval answer (Letta's ``ApprovalCreate``)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidError(field, "must be a list of InputMessage values")
    out = tuple(messages)
    if not out and not allow_empty:
        raise InvalidError(field, "at least one input message is required")
    for i, message in enumerate(out):
        if not isinstance(message, InputMessage):
            raise InvalidError(f"{field}[{i}]", f"must be an InputMessage, got {message!r}")
        # an approval's decisions are checked by the agent, against the calls that wait
        answer = message.role == "approval" and i == 0 and field == "messages"
        if not answer and message.role == "approval":  # well-formed, but answers nothing here
            raise InvalidError(
                f"{field}[{i}].type",
                "an approval answers the run that waits: only as the first of messages",
                status=400,
            )
        if not answer and message.role not in ("user", "system", "assistant"):
            raise InvalidError(
                f"{field}[{i}].role", f"must be user, system or assistant, got {message.role!r}"
            )
        if not answer or message.content:  # an approval's content is its optional reason
            text(message.content, f"{field}[{i}].content")
        if message.otid is not None:
            text(message.otid, f"{field}[{i}].otid")
    return out


def with_otid(messages: tuple[InputMessage, ...], otid: str) -> tuple[InputMessage, ...]:
    """The messages with ``otid`` on the first one, if it has none."""
    if messages[0].otid is not None:
        return messages
    return (attrs.evolve(messages[0], otid=otid), *messages[1:])
