"""``create_app``: the Letta-compatible ASGI application over an AgentService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# FastAPI imports pydantic.v1 lazily, when it builds the first route; inside a simulation the
# datetime guards would break that import (it subclasses datetime.date), so it happens here.
import pydantic.v1  # noqa: F401
import trio
from fastapi import Depends, FastAPI

from kelpie_agent import __version__
from kelpie_agent.service import AgentService

from ._auth import BEARER, DOCS, docs_routes, make_auth
from ._errors import Observer, install_error_handlers
from ._openapi import exact_openapi
from ._routes_agents import agents_router
from ._routes_archival import archival_router
from ._routes_blocks import blocks_router
from ._routes_health import health_router
from ._routes_messages import Background, messages_router
from ._routes_tools import tools_router

__all__ = ["create_app"]


def create_app(
    service: AgentService,
    *,
    api_key: str | None = None,
    version: str = __version__,
    observer: Observer | None = None,
    ping_interval: float = 15.0,
    background: trio.Nursery | None = None,
) -> FastAPI:
    """The REST API (docs/http-api.md) over ``service``.

    ``api_key``: when set, every route but ``/v1/health/`` needs ``Authorization: Bearer
    <api_key>``. ``observer(kind, **fields)`` hears unexpected errors (``kelpie_dst.log`` in a
    simulation). ``ping_interval``: seconds of silence before a stream sends a ping.
    ``background``: a nursery where ``/messages/async`` runs keep streaming after the answer
    (otherwise the app's lifespan opens one, when the server runs the lifespan protocol).
    Every route is ``async``; nothing runs in a thread pool.
    """
    if not ping_interval > 0:
        raise ValueError(f"ping_interval must be > 0, got {ping_interval!r}")
    holder = Background(background)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if holder.nursery is not None:
            yield
            return
        async with trio.open_nursery() as nursery:
            holder.nursery = nursery
            try:
                yield
            finally:
                holder.nursery = None
                nursery.cancel_scope.cancel()

    closed = {name: None for name in DOCS} if api_key else {}  # served below, behind the key
    app = FastAPI(
        title="Kelpie",
        summary="A Letta-compatible agent server (the REST API letta-client speaks)",
        version=version,
        redirect_slashes=False,
        lifespan=lifespan,
        **closed,  # type: ignore[arg-type]
    )
    build_openapi = app.openapi
    app.openapi = lambda: exact_openapi(build_openapi)  # type: ignore[method-assign]
    install_error_handlers(app, observer)
    check = make_auth(api_key)
    if api_key:
        docs_routes(app, check)
    auth = [Depends(check)]
    if api_key:
        auth.append(Depends(BEARER))  # declares the scheme in the OpenAPI schema
    app.include_router(health_router(version))
    app.include_router(agents_router(service), dependencies=auth)
    app.include_router(blocks_router(service), dependencies=auth)
    app.include_router(tools_router(service), dependencies=auth)
    app.include_router(archival_router(service), dependencies=auth)
    app.include_router(
        messages_router(service, background=holder, ping_interval=ping_interval, observer=observer),
        dependencies=auth,
    )
    return app
