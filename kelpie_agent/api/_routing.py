"""Route registration helpers shared by the ``_routes_*`` modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI, params
from fastapi.routing import APIRoute

__all__ = ["ERROR_RESPONSES", "collection_route", "routes"]

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


def routes(app: FastAPI, routers: list[APIRouter], dependencies: list[params.Depends]) -> None:
    """Add every route of ``routers`` to ``app`` itself, each with ``dependencies`` first.

    What ``app.include_router(router, dependencies=...)`` would serve, in the same order, with
    the same OpenAPI schema, but flat: FastAPI matches an included router's routes through a
    per-route context (twice per request: to select the router, then the route), which cost
    several percent of every simulated request; the app's own routes match by one regex each.
    Without ``dependencies`` the routes themselves move (analysing them again would add half
    a second to every start of ``kelpie serve``); they do not see ``app.dependency_overrides``,
    which kelpie does not use. With them, each is added again with its own options.
    """
    for router in routers:
        for route in router.routes:
            if not isinstance(route, APIRoute):
                raise TypeError(f"only API routes can be added flat, not {route!r}")
            if not dependencies:
                app.router.routes.append(route)
                continue
            app.router.add_api_route(
                route.path,
                route.endpoint,
                response_model=route.response_model,
                status_code=route.status_code,
                tags=route.tags,
                dependencies=[*dependencies, *route.dependencies],
                summary=route.summary,
                description=route.description,
                response_description=route.response_description,
                responses=route.responses,
                deprecated=route.deprecated,
                name=route.name,
                methods=route.methods,
                operation_id=route.operation_id,
                response_model_include=route.response_model_include,
                response_model_exclude=route.response_model_exclude,
                response_model_by_alias=route.response_model_by_alias,
                response_model_exclude_unset=route.response_model_exclude_unset,
                response_model_exclude_defaults=route.response_model_exclude_defaults,
                response_model_exclude_none=route.response_model_exclude_none,
                include_in_schema=route.include_in_schema,
                response_class=route.response_class,
                callbacks=route.callbacks,
                openapi_extra=route.openapi_extra,
                generate_unique_id_function=route.generate_unique_id_function,
                strict_content_type=route.strict_content_type,
                max_body_size=route.max_body_size,
            )
