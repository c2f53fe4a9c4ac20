"""Route registration helpers shared by the ``_routes_*`` modules."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI, params
from fastapi.routing import APIRoute
from starlette._utils import get_route_path
from starlette.convertors import PathConvertor
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ERROR_RESPONSES", "IndexedRoutes", "collection_route", "index_routes", "routes"]

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
    index_routes(app)


def _segments(path: str) -> list[str | None]:
    """A route's path format split at ``/``: its literal segments, and ``None`` for those
    with a parameter in them."""
    return [None if "{" in part else part for part in path.split("/")]


def _indexable(router: APIRouter) -> bool:
    """Whether every route is a plain (API) route whose parameters stay within a segment, and
    nothing else is tried after the routes (a slash redirect, low-priority routes)."""
    if router.redirect_slashes or getattr(router, "_low_priority_routes", None):
        return False
    for route in router.routes:
        if type(route) not in (APIRoute, Route) or not isinstance(route, Route):
            return False
        if any(isinstance(c, PathConvertor) for c in route.param_convertors.values()):
            return False
    return True


class _RouteIndex:
    """A router's routes grouped by the paths they can match.

    A route whose parameters each match within one segment (every convertor but ``path``)
    matches only paths with as many ``/`` as its own, and the same third and last segments
    where its own are literal (``/v1/<resource>/.../<action>``). A group keeps the routes in
    the router's order, so its first match is the router's first match, and it holds every
    route that matches a path's segments (FULL, or PARTIAL for another method)."""

    def __init__(self, router: APIRouter) -> None:
        self.source = router.routes
        self.size = len(router.routes)
        self.usable = _indexable(router)
        self._router = router
        self._shapes: dict[int, list[tuple[BaseRoute, list[str | None]]]] = {}
        # segment count -> (literal third segments, literal last segments)
        self._literals: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self._groups: dict[tuple[int, str, str], APIRouter] = {}
        if not self.usable:
            return
        for route in router.routes:
            shape = _segments(route.path_format)  # type: ignore[attr-defined]
            self._shapes.setdefault(len(shape), []).append((route, shape))
        for count, same in self._shapes.items():
            thirds = frozenset(s[2] for _, s in same if count > 2 and s[2] is not None)
            lasts = frozenset(s[-1] for _, s in same if s[-1] is not None)
            self._literals[count] = (thirds, lasts)

    def router(self, path: str) -> APIRouter | None:
        """A router over the routes that may match ``path`` (``None``: none may)."""
        parts = path.split("/")
        count = len(parts)
        literals = self._literals.get(count)
        if literals is None:
            return None
        thirds, lasts = literals
        third = parts[2] if count > 2 and parts[2] in thirds else "*"
        last = parts[-1] if parts[-1] in lasts else "*"
        group = self._groups.get((count, third, last))
        if group is None:
            group = copy.copy(self._router)  # the same router, over fewer routes
            group.routes = [
                route
                for route, shape in self._shapes[count]
                if (count <= 2 or shape[2] is None or shape[2] == third)
                and (shape[-1] is None or shape[-1] == last)
            ]
            self._groups[(count, third, last)] = group
        return group


class IndexedRoutes:
    """A router's dispatch (its ``app``) run over the routes a request's path may match,
    not all of them: the API has 140 routes, tried one regex at a time, and the busiest
    (messages, steps, runs) come late. FastAPI's own code still picks the route, so the
    first-match order, 405s and 404s are as before; lifespan, websockets, paths no route can
    match and routers the index cannot describe go to the router itself."""

    def __init__(self, router: APIRouter, dispatch: ASGIApp) -> None:
        self.router = router
        self.dispatch = dispatch  # the router's own app
        self.index: _RouteIndex | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        router = self.router
        index = self.index
        if index is None or index.source is not router.routes or index.size != len(router.routes):
            index = self.index = _RouteIndex(router)  # routes were added: index them again
        group = (
            index.router(get_route_path(scope))
            if scope["type"] == "http" and index.usable
            else None
        )
        if group is None:
            await self.dispatch(scope, receive, send)
            return
        if "router" not in scope:
            scope["router"] = router  # as the router's app sets it
        await group.app(scope, receive, send)


def index_routes(app: FastAPI) -> None:
    """Dispatch ``app``'s requests through an :class:`IndexedRoutes` (idempotent; a router
    with middleware of its own is left alone)."""
    router = app.router
    if router.middleware_stack == router.app:
        router.middleware_stack = IndexedRoutes(router, router.middleware_stack)
