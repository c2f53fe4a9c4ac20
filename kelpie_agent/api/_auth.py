"""Optional bearer-token auth: with an API key set, every route but health requires
``Authorization: Bearer <key>`` (what letta-client sends when given ``api_key``), the schema
and documentation routes (``/openapi.json``, ``/docs``, ``/redoc``) included."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPBearer

from kelpie_agent.service import ServiceError

from ._context import current

__all__ = ["BEARER", "DOCS", "docs_routes", "require_token"]

# Where FastAPI would serve the schema and its two documentation pages.
DOCS = {"openapi_url": "/openapi.json", "docs_url": "/docs", "redoc_url": "/redoc"}

# Declares the scheme in the OpenAPI schema; the check itself is ours (a 401, not a 403).
BEARER = HTTPBearer(auto_error=False, description="The server's API key, when it has one")


async def require_token(request: Request) -> None:
    """A FastAPI dependency that checks the bearer token against the key of the node the
    request is for (a no-op when that node has none)."""
    expected = current().api_key
    if expected is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise ServiceError("missing Authorization header (expected 'Bearer <api key>')", status=401)
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(errors="replace"), expected
    ):
        raise ServiceError("invalid API key", status=401)


def docs_routes(app: FastAPI, auth: Callable[[Request], Awaitable[None]]) -> None:
    """Serve the schema and the documentation pages behind ``auth`` (build the app with
    ``openapi_url=None, docs_url=None, redoc_url=None`` so FastAPI does not serve them
    openly). A browser does not send the key by itself: with a key set, read the schema with
    ``curl -H "Authorization: Bearer $KEY" .../openapi.json`` (docs/deployment.md)."""
    guard: Any = [Depends(auth)]
    title = app.title

    @app.get(DOCS["openapi_url"], include_in_schema=False, dependencies=guard)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get(DOCS["docs_url"], include_in_schema=False, dependencies=guard)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=DOCS["openapi_url"], title=f"{title} - docs")

    @app.get(DOCS["redoc_url"], include_in_schema=False, dependencies=guard)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=DOCS["openapi_url"], title=f"{title} - ReDoc")
