"""Shared pieces of the API's pydantic models: the request base class and its input checks.

Every request body derives from :class:`RequestModel`. Unknown fields are ignored (letta-client
sends many optional fields Kelpie does not use; Letta's server ignores unknown ones too), and
before any field is validated the raw JSON is checked for values that could pass pydantic but
break storage or the JSON encoder later: lone surrogates, non-finite floats, integers outside
64 bits, and nesting deeper than :data:`MAX_DEPTH`. Each check names the field it failed at,
so a bad body is always a 422, never a 500.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "MIN_INT",
    "RequestModel",
    "ResponseModel",
    "check_json_value",
    "epoch_datetime",
]

MAX_DEPTH = 32
MIN_INT = -(2**63)
MAX_INT = 2**63 - 1


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
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str):
                    _check_text(key, where)
                stack.append((sub, (*where, str(key))))
        elif isinstance(item, list | tuple):
            stack.extend((sub, (*where, i)) for i, sub in enumerate(item))


def _check_text(text: str, where: tuple[str | int, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"{_where(where)}: text contains a lone surrogate (not valid UTF-8)"
        ) from None


class RequestModel(BaseModel):
    """Base of every request body: unknown fields ignored, storable values only."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        check_json_value(data)
        return data


class ResponseModel(BaseModel):
    """Base of every response body (``None`` fields are sent as ``null``, as Letta does)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def epoch_datetime(epoch: float) -> datetime:
    """Epoch seconds (from the Clock port, stored in records) as an aware UTC datetime."""
    return datetime.fromtimestamp(epoch, tz=UTC)
