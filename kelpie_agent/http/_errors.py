"""Errors of the HTTP server, all under :class:`HttpServerError`."""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = ["AsgiProtocolError", "ClientDisconnected", "HttpServerError", "LifespanError"]


class HttpServerError(KelpieError):
    """Root of the HTTP server's errors."""


class ClientDisconnected(HttpServerError, OSError):
    """Raised by ASGI ``send()`` once the client is gone (ASGI 2.4: a subclass of ``OSError``).

    The app should stop producing; the server has already closed (or is closing) the connection.
    """


class AsgiProtocolError(HttpServerError, RuntimeError):
    """The application broke the ASGI protocol (an unknown message, a second response start,
    a header h11 refuses, a body after the response ended). Raised into the app by ``send()``;
    the client gets a 500 if nothing was sent yet, otherwise the connection is closed."""


class LifespanError(HttpServerError):
    """The application's lifespan startup failed (``lifespan.startup.failed``, or an exception
    with ``lifespan="on"``); the server does not start."""
