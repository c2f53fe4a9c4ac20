"""The node a request is for: one set of routes per process, one :class:`ApiNode` per app.

FastAPI builds a route's dependency analysis and pydantic adapters when the route is
registered, and more on its first request; doing that for every ``create_app`` (every server
start, and every node restart in a simulation) was a third of an agent scenario's CPU. So the
routes are built once per process (``_app.shared_app``) and look up the service they serve
here, per request: :class:`~kelpie_agent.api.KelpieApp` sets :data:`NODE` around each ASGI
call, and trio copies the context into every task the request starts (streams).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import attrs

from kelpie_agent.service import AgentService

__all__ = ["NODE", "ApiNode", "Observer", "current", "current_service"]

Observer = Callable[..., None]


@attrs.frozen
class ApiNode:
    """What one ``create_app`` call serves: its service and options."""

    service: AgentService
    api_key: bytes | None
    observer: Observer | None
    ping_interval: float


NODE: ContextVar[ApiNode] = ContextVar("kelpie_agent.api.node")


def current() -> ApiNode:
    """The node the running request is for (set by :class:`~kelpie_agent.api.KelpieApp`)."""
    try:
        return NODE.get()
    except LookupError:
        raise RuntimeError(
            "kelpie_agent.api: no node for this request; serve the app create_app() returned"
        ) from None


def current_service() -> AgentService:
    return current().service
