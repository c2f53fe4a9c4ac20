"""A small TOML writer for scenario documents (the stdlib reads TOML but cannot write it).

It covers what scenario files hold: strings, booleans, integers, floats, arrays of scalars,
inline tables inside arrays, arrays of tables and nested tables. Floats are written with
``repr``, which reads back as the same float.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(str(k))} = {_scalar(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def dumps(document: Mapping[str, Any]) -> str:
    lines: list[str] = []
    _table(document, [], lines)
    return "\n".join(lines).strip() + "\n"


def _table(table: Mapping[str, Any], path: list[str], lines: list[str]) -> None:
    scalars = [
        (k, v) for k, v in table.items() if not isinstance(v, Mapping) and not _is_table_array(v)
    ]
    for key, value in scalars:
        lines.append(f"{_key(key)} = {_scalar(value)}")
    for key, value in table.items():
        if isinstance(value, Mapping):
            sub = [*path, key]
            has_scalars = any(
                not isinstance(v, Mapping) and not _is_table_array(v) for v in value.values()
            )
            if has_scalars or not value:
                lines.append("")
                lines.append("[" + ".".join(_key(p) for p in sub) + "]")
            _table(value, sub, lines)
        elif _is_table_array(value):
            for item in value:
                lines.append("")
                lines.append("[[" + ".".join(_key(p) for p in [*path, key]) + "]]")
                _table(item, [*path, key], lines)
