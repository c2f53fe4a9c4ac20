"""Route registration helpers shared by the ``_routes_*`` modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter

__all__ = ["ERROR_RESPONSES", "collection_route"]

_ERROR_SCHEMA = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"detail": {"type": "string"}},
            "required": ["detail"],
        }
    }
}
# Documented on every route, so the OpenAPI schema describes every answer the API can give.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "A semantic error in the request", "content": _ERROR_SCHEMA},
    401: {"description": "Missing or wrong API key", "content": _ERROR_SCHEMA},
    404: {"description": "Unknown id", "content": _ERROR_SCHEMA},
    409: {"description": "Conflict with the current state", "content": _ERROR_SCHEMA},
    422: {"description": "Invalid request (names the field)", "content": _ERROR_SCHEMA},
    503: {"description": "Storage or the agent's node unavailable", "content": _ERROR_SCHEMA},
}


def collection_route(
    router: APIRouter, path: str, endpoint: Callable[..., Any], methods: list[str], **options: Any
) -> None:
    """Register ``path`` (which ends in ``/``, as letta-client calls it) and, hidden from the
    schema, the same route without the slash: neither answers with a redirect."""
    if not path.endswith("/"):
        raise ValueError(f"a collection path ends with '/': {path}")
    router.add_api_route(path, endpoint, methods=methods, responses=ERROR_RESPONSES, **options)
    alias = {k: v for k, v in options.items() if k not in ("operation_id",)}
    router.add_api_route(
        path.rstrip("/"), endpoint, methods=methods, include_in_schema=False, **alias
    )
