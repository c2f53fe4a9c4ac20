"""Reading a scenario document: typed field access with one-line errors that name the field.

Every error is a :class:`ScenarioError` (a :class:`~kelpie_dst.UsageError`) whose message is one
line: ``<file>: <dotted.field>: <what is wrong> (allowed: <values>)``. The CLI prints it and
exits 64 (see docs/scenarios.md, "Errors").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from .._entry import parse_duration
from .._errors import UsageError

__all__ = ["Doc", "ScenarioError", "describe_value"]

_MISSING: Any = object()


class ScenarioError(UsageError):
    """A scenario file (or an override) is malformed. The message is one line."""

    def __init__(
        self, source: str, field: str, message: str, allowed: Iterable[str] | None = None
    ) -> None:
        self.source = source
        self.field = field
        text = f"{source}: {field}: {message}" if field else f"{source}: {message}"
        if allowed is not None:
            values = list(allowed)
            text += f" (allowed: {', '.join(values) if values else 'none'})"
        super().__init__(" ".join(text.split("\n")))


def describe_value(value: object) -> str:
    """``string 'abc'``, ``integer 3``, ``table``: how a TOML value reads in an error."""
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


class Doc:
    """Typed access to one table of a scenario document, with the error context it needs."""

    def __init__(
        self, data: Mapping[str, Any], path: str, source: str, overridden: frozenset[str]
    ) -> None:
        self.data = data
        self.path = path
        self.source = source
        self.overridden = overridden

    def field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str | None, message: str, allowed: Iterable[str] | None = None) -> NoReturn:
        field = self.field(key) if key is not None else self.path
        if any(field == o or field.startswith(o + ".") for o in self.overridden):
            message += " (set by --set)"
        raise ScenarioError(self.source, field, message, allowed)

    def only(self, allowed: Sequence[str]) -> None:
        """Reject keys outside ``allowed`` (an unknown field)."""
        for key in self.data:
            if key not in allowed:
                self.fail(key, "unknown field", allowed)

    def sub(self, key: str, *, default_empty: bool = True) -> Doc:
        value = self.data.get(key, _MISSING)
        if value is _MISSING:
            if not default_empty:
                self.fail(key, "missing required table")
            value = {}
        if not isinstance(value, Mapping):
            self.fail(key, f"expected a table, got {describe_value(value)}")
        return Doc(value, self.field(key), self.source, self.overridden)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key, default)
        if value is _MISSING:
            self.fail(key, "missing required field")
        return value

    def text(self, key: str, default: Any = _MISSING, *, choices: Sequence[str] = ()) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {describe_value(value)}")
        if choices and value not in choices:
            self.fail(key, f"unknown value {value!r}", choices)
        return value

    def flag(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {describe_value(value)}")
        return value

    def integer(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"expected an integer, got {describe_value(value)}")
        if minimum is not None and value < minimum:
            self.fail(key, f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            self.fail(key, f"must be at most {maximum}, got {value}")
        return value

    def number(self, key: str, default: Any = _MISSING) -> float:
        value = self.raw(key, default)
        return self.as_number(key, value)

    def as_number(self, key: str | None, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, f"expected a number, got {describe_value(value)}")
        if not math.isfinite(value):
            self.fail(key, f"expected a finite number, got {value!r}")
        return float(value)

    def probability(self, key: str, default: Any = _MISSING) -> float:
        value = self.number(key, default)
        if not 0.0 <= value <= 1.0:
            self.fail(key, f"a probability must be within [0, 1], got {value!r}")
        return value

    def duration(self, key: str, default: Any = _MISSING) -> float:
        return self.as_duration(key, self.raw(key, default))

    def as_duration(self, key: str | None, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            got = describe_value(value)
            self.fail(key, f"expected a duration like '90s' or '1h30m', got {got}")
        try:
            return parse_duration(value)
        except UsageError as error:
            self.fail(key, str(error))

    def str_list(self, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        value = self.raw(key, default)
        if not isinstance(value, list | tuple):
            self.fail(key, f"expected an array of strings, got {describe_value(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{key}[{index}]", f"expected a string, got {describe_value(item)}")
        return tuple(value)
