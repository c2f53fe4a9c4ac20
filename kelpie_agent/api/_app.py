"""``create_app``: the Letta-compatible ASGI application over an AgentService.

The FastAPI app (routes, validation, OpenAPI schema) is built once per process for each
``(version, auth)`` pair and shared; :class:`KelpieApp` is the cheap per-service front that
tells the shared routes which service, key and options the request is for (``_context.py``).
"""

from __future__ import annotations

from typing import Any

# FastAPI imports pydantic.v1 lazily, when it builds the first route; inside a simulation the
# datetime guards would break that import (it subclasses datetime.date), so it happens here.
import pydantic.v1  # noqa: F401
from fastapi import Depends, FastAPI
from starlette.types import Receive, Scope, Send

from kelpie_agent import __version__
from kelpie_agent.service import AgentService

from ._auth import BEARER, DOCS, docs_routes, require_token
from ._context import NODE, ApiNode, Observer
from ._errors import install_error_handlers
from ._openapi import exact_openapi
from ._query import known_query
from ._routes_agent_files import agent_files_router
from ._routes_agents import agents_router
from ._routes_approvals import approvals_router
from ._routes_archival import archival_router
from ._routes_archives import archives_router
from ._routes_blocks import blocks_router
from ._routes_compaction import compaction_router
from ._routes_conversations import conversations_router
from ._routes_directory import directory_router
from ._routes_folders import folders_router
from ._routes_health import health_router
from ._routes_history import history_router
from ._routes_identities import identities_router
from ._routes_mcp import mcp_router
from ._routes_messages import messages_router
from ._routes_runs import runs_router
from ._routes_schedules import schedules_router
from ._routes_search import search_router
from ._routes_steps import steps_router
from ._routes_tools import tools_router
from ._routing import routes

__all__ = ["KelpieApp", "create_app", "shared_app"]

_SHARED: dict[tuple[str, bool], FastAPI] = {}


class KelpieApp:
    """The ASGI app ``create_app`` returns: the process's shared FastAPI app, serving one
    service. ``fastapi`` is that shared app (``openapi()`` is its schema)."""

    def __init__(self, fastapi: FastAPI, node: ApiNode) -> None:
        self.fastapi = fastapi
        self.node = node

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = NODE.set(self.node)
        try:
            await self.fastapi(scope, receive, send)
        finally:
            NODE.reset(token)

    def openapi(self) -> dict[str, Any]:
        return self.fastapi.openapi()


def create_app(
    service: AgentService,
    *,
    api_key: str | None = None,
    version: str = __version__,
    observer: Observer | None = None,
    ping_interval: float = 15.0,
) -> KelpieApp:
    """The REST API (docs/http-api.md) over ``service``.

    ``api_key``: when set, every route but ``/v1/health/`` needs ``Authorization: Bearer
    <api_key>``. ``observer(kind, **fields)`` hears unexpected errors (``kelpie_dst.log`` in a
    simulation). ``ping_interval``: seconds of silence before a stream sends a ping.
    Every route is ``async``; nothing runs in a thread pool. Cheap: the routes are built once
    per process (:func:`shared_app`).
    """
    if not ping_interval > 0:
        raise ValueError(f"ping_interval must be > 0, got {ping_interval!r}")
    node = ApiNode(
        service=service,
        api_key=api_key.encode() if api_key else None,
        observer=observer,
        ping_interval=ping_interval,
    )
    return KelpieApp(shared_app(version, auth=bool(api_key)), node)


def shared_app(version: str = __version__, *, auth: bool = False) -> FastAPI:
    """The process's FastAPI app for ``version``, with or without bearer auth (built on first
    use). It serves requests only through a :class:`KelpieApp`, which names their service."""
    key = (version, auth)
    app = _SHARED.get(key)
    if app is None:
        app = _SHARED[key] = _build(version, auth)
    return app


def _build(version: str, auth: bool) -> FastAPI:
    closed = {name: None for name in DOCS} if auth else {}  # served below, behind the key
    app = FastAPI(
        title="Kelpie",
        summary="A Letta-compatible agent server (the REST API letta-client speaks)",
        version=version,
        redirect_slashes=False,
        **closed,  # type: ignore[arg-type]
    )
    build_openapi = app.openapi
    app.openapi = lambda: exact_openapi(build_openapi)  # type: ignore[method-assign]
    install_error_handlers(app)
    if auth:
        docs_routes(app, require_token)
    # BEARER declares the scheme in the OpenAPI schema; require_token does the check
    # known_query: a query key the route does not declare is a 422, never silently ignored
    known = [Depends(known_query)]
    checks = [Depends(require_token), Depends(BEARER), *known] if auth else known
    routes(app, [health_router(version)], known)
    routes(
        app,
        [
            agent_files_router(),
            agents_router(),
            blocks_router(),
            tools_router(),
            approvals_router(),
            archival_router(),
            archives_router(),
            folders_router(),
            mcp_router(),
            identities_router(),
            schedules_router(),
            messages_router(),
            history_router(),
            compaction_router(),
            conversations_router(),
            runs_router(),
            steps_router(),
            search_router(),
            directory_router(),
        ],
        checks,
    )
    return app
