"""Unknown query parameters are refused, not ignored.

FastAPI reads the query parameters a route declares and drops the rest unread, so a filter a
client sends that the route does not know (a newer SDK's, a misspelt one) would silently list
everything. :func:`known_query`, a dependency of every route, compares the request's query keys
with the route's declared ones (its own and its dependencies') and answers a 422 naming the
first unknown key: ``query.<key>: not a parameter of this route (not supported by this
server)``. Every field and filter letta-client can send takes effect or is refused naming it
(docs/http-api.md, "Request fields"; the audit ``tests/api/sdk_fields.py`` keeps that true).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant

from kelpie_agent.service import InvalidError

__all__ = ["UNKNOWN_QUERY", "declared_query", "known_query"]

UNKNOWN_QUERY = "not a parameter of this route (not supported by this server)"

_DECLARED: dict[int, frozenset[str]] = {}


def declared_query(dependant: Dependant) -> frozenset[str]:
    """The query keys ``dependant`` and its sub-dependencies read (by alias)."""
    names: set[str] = set()
    stack = [dependant]
    while stack:
        item = stack.pop()
        names |= {param.alias for param in item.query_params}
        stack.extend(item.dependencies)
    return frozenset(names)


async def known_query(request: Request) -> None:
    """A FastAPI dependency: refuse (422) a query key the matched route does not declare."""
    if not request.query_params:
        return
    route: Any = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    declared = _DECLARED.get(id(route))
    if declared is None:
        declared = _DECLARED[id(route)] = declared_query(dependant)
    for key in request.query_params:  # in the order sent: the first unknown one is named
        if key not in declared:
            raise InvalidError(f"query.{key}", UNKNOWN_QUERY)
