"""Optional bearer-token auth: with an API key set, every route but health requires
``Authorization: Bearer <key>`` (what letta-client sends when given ``api_key``)."""

from __future__ import annotations

import hmac

from fastapi import Request
from fastapi.security import HTTPBearer

from kelpie_agent.service import ServiceError

from ._context import current

__all__ = ["BEARER", "require_token"]

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
