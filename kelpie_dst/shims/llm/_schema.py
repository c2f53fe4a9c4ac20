"""Random instances of JSON schemas (valid and deliberately invalid), and a small validator.

Covers the subset tool schemas use: ``type`` (one or a list), ``properties``, ``required``,
``additionalProperties: false``, ``items``, ``enum``, ``const``, ``minimum``/``maximum``,
``minLength``/``maxLength``, ``minItems``/``maxItems``, ``anyOf``/``oneOf``. Anything else is
ignored (so treated as "any value").
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

__all__ = ["example", "instance", "invalid_instance", "validate"]

_WORDS = ("alpha", "beta", "gamma", "delta", "kelp", "otter", "tide", "reef", "moss", "salt")
_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
Schema = Mapping[str, Any]


def _types(schema: Schema) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and kind:
        return [str(k) for k in kind]
    if "properties" in schema:
        return ["object"]
    return ["string", "integer", "boolean"]


def instance(schema: Schema, rng: random.Random, depth: int = 0) -> Any:
    """A random value that satisfies ``schema``."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return rng.choice(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return instance(rng.choice(list(schema[key])), rng, depth + 1)
    kind = rng.choice(_types(schema))
    if kind == "object":
        props: Mapping[str, Schema] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        out: dict[str, Any] = {}
        for name in sorted(set(props) | required):
            if name in required or (depth < 3 and rng.random() < 0.5):
                out[name] = instance(props.get(name, {}), rng, depth + 1)
        return out
    if kind == "array":
        low = int(schema.get("minItems", 0))
        high = max(low, min(int(schema.get("maxItems", low + 3)), low + 3))
        items = schema.get("items", {"type": "string"})
        return [instance(items, rng, depth + 1) for _ in range(rng.randint(low, high))]
    if kind == "string":
        low = int(schema.get("minLength", 1))
        high = max(low, int(schema.get("maxLength", max(low, 24))))
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
        while len(text) < low:
            text += " " + rng.choice(_WORDS)
        return text[:high]
    if kind in ("integer", "number"):
        low = schema.get("minimum", -100 if rng.random() < 0.2 else 0)
        high = schema.get("maximum", low + 100)
        if kind == "integer":
            return rng.randint(int(-(-low // 1)), int(high // 1))
        return round(low + (high - low) * rng.random(), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def example(schema: Schema) -> Any:
    """A fixed valid value for ``schema`` (the same every time)."""
    return instance(schema, random.Random(0))  # noqa: S311  (seeded: deterministic)


def invalid_instance(schema: Schema, rng: random.Random) -> dict[str, Any] | None:
    """An object that violates object schema ``schema``, or ``None`` if every object fits."""
    valid = instance(schema, rng)
    if not isinstance(valid, dict):
        return None
    props: Mapping[str, Schema] = schema.get("properties", {})
    required = list(schema.get("required", ()))
    ways: list[str] = []
    if required:
        ways.append("drop")
    if props:
        ways.append("retype")
    if schema.get("additionalProperties") is False:
        ways.append("extra")
    rng.shuffle(ways)
    for way in ways:
        bad = dict(valid)
        if way == "drop":
            del bad[rng.choice(sorted(required))]
        elif way == "extra":
            bad["unexpected_" + rng.choice(_WORDS)] = rng.choice(_WORDS)
        else:
            name = rng.choice(sorted(props))
            bad[name] = _wrong_value(props[name], rng)
        if validate(schema, bad):
            return bad
    return None


def _wrong_value(schema: Schema, rng: random.Random) -> Any:
    allowed = set(_types(schema))
    if "integer" in allowed:
        allowed.add("number")  # an integer-valued float would still pass
    choices = [
        k for k in _TYPES if k not in allowed and not ("number" in allowed and k == "integer")
    ]
    if schema.get("enum") or "const" in schema:
        return "not-one-of-" + rng.choice(_WORDS)
    return {
        "string": rng.choice(_WORDS),
        "integer": rng.randint(-5, 5),
        "number": 0.5,
        "boolean": True,
        "array": [rng.choice(_WORDS)],
        "object": {"x": 1},
        "null": None,
    }[rng.choice(choices or ["null"])]


def validate(schema: Schema, value: Any, path: str = "$") -> list[str]:
    """The ways ``value`` breaks ``schema`` (empty if it fits)."""
    errors: list[str] = []
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: must be {schema['const']!r}")
    if "enum" in schema and value not in list(schema["enum"]):
        errors.append(f"{path}: must be one of {list(schema['enum'])!r}")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options and all(validate(option, value, path) for option in options):
            errors.append(f"{path}: matches none of {key}")
    if "type" in schema and not any(_is(kind, value) for kind in _types(schema)):
        return [*errors, f"{path}: expected {schema['type']}, got {type(value).__name__}"]
    if isinstance(value, dict):
        props: Mapping[str, Schema] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{path}: missing required {name!r}")
        for name, item in value.items():
            if name in props:
                errors.extend(validate(props[name], item, f"{path}.{name}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected property {name!r}")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", 1e18):
            errors.append(f"{path}: wrong number of items ({len(value)})")
        if "items" in schema:
            for i, item in enumerate(value):
                errors.extend(validate(schema["items"], item, f"{path}[{i}]"))
    elif isinstance(value, str):
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", 1e18):
            errors.append(f"{path}: length {len(value)} out of range")
    elif (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not schema.get("minimum", -1e308) <= value <= schema.get("maximum", 1e308)
    ):
        errors.append(f"{path}: {value} out of range")
    return errors


def _is(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
        "null": value is None,
    }.get(kind, True)
