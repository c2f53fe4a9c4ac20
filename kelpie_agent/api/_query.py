"""Unknown query parameters and form fields are refused, not ignored.

FastAPI reads the query parameters (and multipart form fields) a route declares and drops the
rest unread, so a filter a client sends that the route does not know (a newer SDK's, a
misspelt one) would silently list everything. :func:`known_query`, a dependency of every
route, compares the request's query keys with the route's declared ones (its own and its
dependencies') and answers a 422 naming the first unknown key: ``query.<key>: not a parameter
of this route (not supported by this server)``; likewise ``body.<field>`` for a form field of
a multipart upload. (JSON bodies refuse unknown fields themselves: ``RequestModel``.)

Every field and filter letta-client can send takes effect or is refused naming it
(docs/http-api.md, "Request fields"; the audit ``tests/api/sdk_fields.py`` keeps that true).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant

from kelpie_agent.service import InvalidError

__all__ = ["UNKNOWN_FIELD", "UNKNOWN_QUERY", "declared_query", "known_query"]

UNKNOWN_FIELD = "not a field of this request (not supported by this server)"
UNKNOWN_QUERY = "not a parameter of this route (not supported by this server)"

_DECLARED: dict[tuple[int, str], frozenset[str]] = {}


def declared_query(dependant: Dependant, where: str = "query") -> frozenset[str]:
    """The query keys (``where="body"``: the form fields) ``dependant`` and its
    sub-dependencies read, by alias."""
    names: set[str] = set()
    stack = [dependant]
    while stack:
        item = stack.pop()
        params = item.query_params if where == "query" else item.body_params
        names |= {param.alias for param in params}
        stack.extend(item.dependencies)
    return frozenset(names)


def _declared(route: Any, where: str) -> frozenset[str]:
    key = (id(route), where)
    found = _DECLARED.get(key)
    if found is None:
        found = _DECLARED[key] = declared_query(route.dependant, where)
    return found


async def known_query(request: Request) -> None:
    """A FastAPI dependency: refuse (422) a query key, or a multipart form field, the matched
    route does not declare."""
    route: Any = request.scope.get("route")
    if getattr(route, "dependant", None) is None:
        return
    if request.query_params:
        declared = _declared(route, "query")
        for key in request.query_params:  # in the order sent: the first unknown one is named
            if key not in declared:
                raise InvalidError(f"query.{key}", UNKNOWN_QUERY)
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        declared = _declared(route, "body")
        for key in await request.form():  # parsed once: FastAPI reuses it
            if key not in declared:
                raise InvalidError(f"body.{key}", UNKNOWN_FIELD)
