"""Shared pieces of the API's pydantic models: the request base class and its input checks.

Every request body derives from :class:`RequestModel`. Unknown fields are refused (a 422
naming ``body.<field>``: every field letta-client can send takes effect or is refused, never
silently ignored; ``tests/api/sdk_fields.py`` audits that against the SDK), and
before any field is validated the raw JSON is checked for values that could pass pydantic but
break storage or the JSON encoder later: lone surrogates, non-finite floats, integers outside
64 bits, and nesting deeper than :data:`MAX_DEPTH`. Each check names the field it failed at,
so a bad body is always a 422, never a 500.
"""

from __future__ import annotations

import functools
import math
import typing
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from kelpie_agent.agent._models import ID_PATTERN, LABEL_PATTERN
from kelpie_agent.service._validate import NOT_BLANK

__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "MIN_INT",
    "NOT_BLANK",
    "Id",
    "JsonObject",
    "Label",
    "NonBlank",
    "RequestModel",
    "ResponseModel",
    "check_json_value",
    "epoch_datetime",
]

MAX_DEPTH = 32
MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
# Text the service refuses when blank; ids and block labels as the agent core checks them.
NonBlank = Annotated[str, StringConstraints(pattern=NOT_BLANK)]
Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Label = Annotated[str, StringConstraints(pattern=LABEL_PATTERN)]


# A free-form JSON object (metadata, json_schema, args): its values are ``JsonValue``s, which
# the schema defines (``_openapi.JSON_VALUE``) and check_json_value enforces.
def _storable_object(value: dict[str, Any]) -> dict[str, Any]:
    check_json_value(value)
    return value


JsonObject = Annotated[
    dict[str, Any],
    AfterValidator(_storable_object),
    WithJsonSchema(
        {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/JsonValue"}}
    ),
]


def _where(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return f"at {out}" if out else "at ."


def check_json_value(value: Any, path: tuple[str | int, ...] = ()) -> None:
    """Raise ``ValueError`` naming the place of the first value storage could not keep, as
    ``at <path>: <problem>`` (the API's 422 handler joins the path to the location)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if len(where) - len(path) > MAX_DEPTH:
            raise ValueError(f"{_where(where)}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not MIN_INT <= item <= MAX_INT:
                raise ValueError(f"{_where(where)}: integer out of the 64-bit range")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{_where(where)}: number must be finite, got {item!r}")
            if item.is_integer() and not MIN_INT <= item <= MAX_INT:  # JSON Schema: an integer
                raise ValueError(f"{_where(where)}: integer out of the 64-bit range")
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str):
                    _check_text(key, where)
                stack.append((sub, (*where, str(key))))
        elif isinstance(item, list | tuple):
            stack.extend((sub, (*where, i)) for i, sub in enumerate(item))


def _check_texts(value: Any, path: tuple[str | int, ...]) -> None:
    """Every string (key or value) in ``value`` is valid Unicode."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str):
                    _check_text(key, where)
                stack.append((sub, (*where, str(key))))
        elif isinstance(item, list):
            stack.extend((sub, (*where, i)) for i, sub in enumerate(item))


@functools.cache
def _declared(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(
        {f.alias or n for n, f in model.model_fields.items()} | set(model.model_fields)
    )


@functools.cache
def _integer_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields whose type is ``int`` (or ``int | None``), by name and alias."""
    found = set()
    for name, field in model.model_fields.items():
        options = typing.get_args(field.annotation) or (field.annotation,)
        if int in options and bool not in options:
            found |= {name, field.alias or name}
    return frozenset(found)


def _check_text(text: str, where: tuple[str | int, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"{_where(where)}: text contains a lone surrogate (not valid UTF-8)"
        ) from None


class RequestModel(BaseModel):
    """Base of every request body: unknown fields refused, storable values only."""

    # strict: JSON types as the schema states them (no 0 for false, no "1" for 1)
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        """Text of the declared fields must be valid Unicode (unknown fields are refused by
        pydantic, as extra; free-form objects check themselves, as JsonObject); an integral
        float is an integer (JSON Schema's view: ``1.0`` is a valid ``integer``)."""
        if not isinstance(data, dict):
            return data
        fields = _declared(cls)
        out = {}
        for key, value in data.items():
            if key in fields:
                _check_texts(value, (key,))
                if key in _integer_fields(cls) and isinstance(value, float) and value.is_integer():
                    value = int(value)
            out[key] = value
        return out


class ResponseModel(BaseModel):
    """Base of every response body (``None`` fields are sent as ``null``, as Letta does)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def epoch_datetime(epoch: float) -> datetime:
    """Epoch seconds (from the Clock port, stored in records) as an aware UTC datetime."""
    return datetime.fromtimestamp(epoch, tz=UTC)
