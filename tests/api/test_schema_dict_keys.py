"""The OpenAPI schema states every rule the server applies to a map's keys: a map whose keys
must match a pattern (``custom_headers``) must also forbid the keys that do not, or a client
(and the API fuzzer, ST202) may send one the schema allows and the server refuses."""

from __future__ import annotations

from typing import Any

import jsonschema

from kelpie_agent.api import create_app


def _maps_with_key_patterns(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if "patternProperties" in node:
            found.append((path, node))
        for key, value in node.items():
            found += _maps_with_key_patterns(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _maps_with_key_patterns(value, f"{path}/{i}")
    return found


def test_maps_with_key_patterns_forbid_other_keys() -> None:
    schema = create_app(None).openapi()  # type: ignore[arg-type]
    maps = _maps_with_key_patterns(schema)
    assert any("custom_headers" in path for path, _ in maps)
    for path, node in maps:
        assert node.get("additionalProperties") is False, path
        validator = jsonschema.Draft202012Validator(node)
        assert validator.is_valid({"X-Api-Key": "secret"}), path
        assert not validator.is_valid({"\u023e": ["not", "a", "header"]}), path
