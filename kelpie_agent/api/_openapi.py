"""The OpenAPI document, made to state exactly what the server accepts.

FastAPI's document is generated from the route signatures and the pydantic models, which
already carry most constraints (lengths, bounds, enums, the id patterns of ``_params``). Two
things it cannot say on its own, added here once the document is built:

* **A query parameter is never null.** ``name: str | None = None`` becomes
  ``anyOf: [string, null]``; a client generated from that sends ``name=`` for null, which the
  server reads as the empty string. The null branch is dropped: leaving the parameter out is
  how a client says "none".
* **Free-form JSON values** (``metadata``, ``json_schema``, ``args``) are what storage can keep:
  integers within 64 bits (``JsonValue``, referenced by the models through :data:`JSON_OBJECT`),
  text that is valid Unicode, nested at most 32 levels (``x-max-depth``; JSON Schema has no
  keyword for depth, so it is stated as an extension and in the description).
* **A multipart form has no other fields** (``additionalProperties: false``): the server
  refuses an unknown form field (``_query.known_query``), as JSON bodies refuse theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._models_common import MAX_DEPTH, MAX_INT, MIN_INT

__all__ = ["JSON_VALUE", "exact_openapi"]

JSON_VALUE: dict[str, Any] = {
    "description": (
        "Any JSON value storage can keep: integers within 64 bits, text without lone "
        f"surrogates, arrays and objects nested at most {MAX_DEPTH} levels deep."
    ),
    "x-max-depth": MAX_DEPTH,
    "anyOf": [
        {"type": "string"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "integer", "minimum": MIN_INT, "maximum": MAX_INT},
        {"type": "number", "not": {"type": "integer"}},
        {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
        {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/JsonValue"}},
    ],
}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    options = schema.get("anyOf")
    if not isinstance(options, list):
        return schema
    kept = [option for option in options if option != {"type": "null"}]
    if len(kept) == len(options):
        return schema
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**kept[0], **rest} if len(kept) == 1 else {**rest, "anyOf": kept}


def exact_openapi(build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The document ``build()`` returns, with the additions above."""
    document = build()
    for methods in document.get("paths", {}).values():
        for operation in methods.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query" and "schema" in parameter:
                    parameter["schema"] = _not_null(parameter["schema"])
            form = operation.get("requestBody", {}).get("content", {}).get("multipart/form-data")
            ref = (form or {}).get("schema", {}).get("$ref", "")
            if ref.startswith("#/components/schemas/"):
                schemas = document["components"]["schemas"]
                schemas[ref.rsplit("/", 1)[1]]["additionalProperties"] = False
    document.setdefault("components", {}).setdefault("schemas", {})["JsonValue"] = JSON_VALUE
    return document
