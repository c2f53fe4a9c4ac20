"""Errors as JSON ``{"detail": "<one line>"}`` with the right status, and retry hints.

Every failure the API answers goes through :func:`classify`, which maps an exception to
(status, detail, retryable). One error type crosses the layers: the service's
:class:`~kelpie_agent.service.ServiceError` (the routes raise it too, for a 401 or a field the
route itself checks) carries its status, detail and whether retrying helps, and
``kelpie_agent.service.translate`` maps the lower layers' errors onto it (unknown id -> 404,
invalid field -> 422, refused by the current state -> 400, conflict -> 409, storage or agent
unavailable -> 503). Anything else is a bug -> 500 with a generic detail (the exception goes to
the observer).

Bodies that fail validation are 422 with the first problems on one line
(``body.messages[0].role: Input should be 'user', 'system' or 'assistant'``) and the list in
``errors``. ``x-should-retry`` tells letta-client (which retries 408/409/429/5xx by default)
whether retrying can help: ``false`` on every error except the retryable ones. A 503 whose
outcome is unknown is retryable exactly when the request is idempotent (a read, an update, a
message carrying the caller's ``otid``): resending the same body then cannot apply it twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kelpie_agent.actors import ActorError
from kelpie_agent.agent._models import ID_PATTERN, LABEL_PATTERN
from kelpie_agent.errors import KelpieError
from kelpie_agent.service import translate
from kelpie_agent.service._validate import NOT_BLANK

from ._context import Observer, current
from ._query import UNKNOWN_FIELD

__all__ = [
    "Observer",
    "classify",
    "error_response",
    "install_error_handlers",
    "validation_detail",
]

_MAX_LISTED = 3


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def classify(exc: BaseException) -> tuple[int, str, bool]:
    """(status, one-line detail, retryable) for an exception raised while serving a request."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    known = translate(exc) if isinstance(exc, Exception) else None
    if known is not None:
        # letta-client resends the same body on a retryable status. After an unknown outcome
        # the service says whether that is safe (``retryable`` only for idempotent requests:
        # reads, updates, a message with the caller's otid).
        return known.status, _one_line(known.detail), known.retryable
    if isinstance(exc, ActorError):  # not retryable: a request this node cannot serve
        return 503, f"agent unavailable: {_one_line(str(exc))}", False
    return 500, f"internal error ({type(exc).__name__}); see the server log", False


def error_response(
    status: int,
    detail: str,
    *,
    retryable: bool = False,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"detail": detail}
    if extra:
        body.update(extra)
    out_headers = {"x-should-retry": "true" if retryable else "false"}
    out_headers.update(headers or {})
    return JSONResponse(body, status_code=status, headers=out_headers)


def _loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith("["):
            out += part
        else:
            out += f".{part}" if out else str(part)
    return out or "request"


# Patterns of the schema, in words (what a 422 says instead of the regex).
_SAID = {
    NOT_BLANK: "must not be blank (only spaces, tabs and newlines)",
    ID_PATTERN: "not a valid id (1-200 letters, digits, '_', '.', ':' or '-')",
    LABEL_PATTERN: "not a valid label (1-100 letters, digits, '_', '.' or '-')",
}


def validation_detail(errors: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    """One line naming the first problems, and the list (location, message, type)."""
    listed: list[dict[str, Any]] = []
    for error in errors:
        loc = list(error.get("loc", ())) if isinstance(error, dict) else []
        msg = _one_line(error.get("msg", "invalid")) if isinstance(error, dict) else str(error)
        kind = error.get("type", "value_error") if isinstance(error, dict) else "value_error"
        if kind == "json_invalid":
            ctx = error.get("ctx") or {}
            msg = f"{msg}: {_one_line(ctx.get('error', ''))}".rstrip(": ")
        # "Value error, x" (a model validator's message) reads better as "x"
        msg = msg.removeprefix("Value error, ")
        if kind == "extra_forbidden":  # a field the request model does not have
            msg = UNKNOWN_FIELD
        if kind == "string_pattern_mismatch" and (error.get("ctx") or {}).get("pattern") in _SAID:
            msg = _SAID[error["ctx"]["pattern"]]
        if msg.startswith("at ") and ": " in msg:  # the storable-value check names its place
            where, msg = msg[3:].split(": ", 1)
            loc += [] if where == "." else [where]
        listed.append({"loc": loc, "msg": msg, "type": kind})
    # a field the server does not support is named first: the most useful thing to say
    listed.sort(key=lambda e: e["type"] != "extra_forbidden")
    parts = [f"{_loc(e['loc'])}: {e['msg']}" for e in listed[:_MAX_LISTED]]
    if len(listed) > _MAX_LISTED:
        parts.append(f"and {len(listed) - _MAX_LISTED} more")
    return "; ".join(parts) or "invalid request", listed


def _matching(routes: Sequence[Any], scope: Scope) -> list[Any]:
    """The routes whose path matches this request's (any method), looking into routers
    included with ``include_router`` (FastAPI keeps each as one entry)."""
    found = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            prefix = getattr(getattr(route, "include_context", None), "prefix", "") or ""
            path = str(scope.get("path", ""))
            if path.startswith(prefix):
                found += _matching(inner.routes, {**scope, "path": path[len(prefix) :]})
            continue
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            found.append(route)
    return found


def _literals(route: Any) -> int:
    path = str(getattr(route, "path_format", getattr(route, "path", "")))
    return sum(1 for part in path.split("/") if part and not part.startswith("{"))


def allowed_methods(routes: Sequence[Any], scope: Scope) -> list[str]:
    """The methods of the resource at this request's path, for a 405's ``Allow``: those of
    the matching routes with the most literal segments (``.../archival-memory/search`` is the
    search, not a passage whose id is "search")."""
    matching = _matching(routes, scope)
    most = max((_literals(route) for route in matching), default=0)
    methods: set[str] = set()
    for route in matching:
        if _literals(route) == most:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error as ``{"detail": ...}``; never a traceback. Unexpected errors go to
    the observer of the node the request is for."""

    def observe(kind: str, **fields: Any) -> None:
        observer = current().observer
        if observer is not None:
            try:
                observer(kind, **fields)
            except Exception:
                pass

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        detail, listed = validation_detail(exc.errors())
        return error_response(422, detail, extra={"errors": listed})

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # Starlette names one route's methods; list every route's
            headers["Allow"] = ", ".join(allowed_methods(request.app.routes, request.scope))
        return error_response(exc.status_code, _one_line(str(exc.detail)), headers=headers)

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        status, detail, retryable = classify(exc)
        if status >= 500:
            observe(
                "api.error",
                method=request.method,
                path=request.url.path,
                status=status,
                error=f"{type(exc).__name__}: {_one_line(str(exc))}",
            )
        return error_response(status, detail, retryable=retryable)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(KelpieError, on_error)
    app.add_middleware(_CatchAll, observe=observe)


class _CatchAll:
    """ASGI middleware: an exception no handler took becomes a JSON 500 (Starlette's own
    last-resort handler would re-raise it into the server after answering)."""

    def __init__(self, app: ASGIApp, observe: Observer) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            status, detail, retryable = classify(exc)
            self.observe(
                "api.error",
                method=scope.get("method"),
                path=scope.get("path"),
                status=status,
                error=f"{type(exc).__name__}: {_one_line(str(exc))}",
            )
            if not started:
                response = error_response(status, detail, retryable=retryable)
                await response(scope, receive, send)
