"""The Letta-compatible REST API and SSE streaming of kelpie_agent, as an ASGI app.

``create_app(service)`` builds a FastAPI application over an ``AgentService``; any ASGI server
serves it (Kelpie's own h11 server on trio sockets, in production and in simulation). Routes,
shapes, errors, auth and streaming: docs/http-api.md.
"""

from ._app import KelpieApp as KelpieApp
from ._app import create_app as create_app

__all__ = ["KelpieApp", "create_app"]
