"""``ServerOptions``: the HTTP server's limits and timeouts (seconds of trio time)."""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["LIFESPAN_MODES", "ServerOptions"]

LIFESPAN_MODES = ("auto", "on", "off")
MiB = 1024 * 1024


def _seconds(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"ServerOptions.{attribute.name} must be a positive number of seconds, got {value!r}"
        )


def _size(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"ServerOptions.{attribute.name} must be a positive number of bytes, got {value!r}"
        )


def _lifespan(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if value not in LIFESPAN_MODES:
        raise ValueError(f"ServerOptions.lifespan must be one of {LIFESPAN_MODES}, got {value!r}")


def _root_path(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or (value and (not value.startswith("/") or value.endswith("/"))):
        raise ValueError(
            "ServerOptions.root_path must be '' or a path like '/api' (leading slash, no "
            f"trailing slash), got {value!r}"
        )


@attrs.frozen(kw_only=True)
class ServerOptions:
    """Limits and timeouts of :class:`~kelpie_agent.http.HttpServer` (docs/http-server.md).

    All durations are seconds on trio's clock, so they are virtual inside a simulation.

    * ``max_body_bytes``: a larger request body is answered ``413``; a declared
      ``Content-Length`` over the limit is refused before the app runs (and before
      ``100 Continue``).
    * ``max_header_bytes``: a request line plus headers larger than this is answered ``431``.
    * ``header_timeout``: a request whose head has not fully arrived this long after its first
      byte (or after the connection opened) gets ``408`` and the connection is closed.
    * ``body_timeout``: the longest wait for the next piece of a request body; then ``408``.
    * ``keep_alive_timeout``: an idle keep-alive connection is closed after this long.
    * ``write_timeout``: a response write that makes no progress for this long (the client
      stopped reading) counts as a disconnect.
    * ``shutdown_grace``: the default grace of :meth:`HttpServer.shutdown`.
    * ``lifespan``: ``"auto"`` (run the ASGI lifespan protocol if the app supports it),
      ``"on"`` (it must), ``"off"``.
    * ``lifespan_timeout``: the longest wait for lifespan startup or shutdown to complete.
    * ``root_path``: the ASGI ``root_path`` (the app is mounted below this prefix).
    * ``receive_bytes``: the size of one socket read.
    * ``linger_timeout``: after an error response sent while the client was still sending,
      how long the server keeps reading (and discarding) before closing, so the client sees
      the response rather than a reset.
    * ``backlog``: the listen backlog (``None``: trio's default).
    """

    max_body_bytes: int = attrs.field(default=16 * MiB, validator=_size)
    max_header_bytes: int = attrs.field(default=64 * 1024, validator=_size)
    header_timeout: float = attrs.field(default=10.0, validator=_seconds)
    body_timeout: float = attrs.field(default=30.0, validator=_seconds)
    keep_alive_timeout: float = attrs.field(default=5.0, validator=_seconds)
    write_timeout: float = attrs.field(default=30.0, validator=_seconds)
    shutdown_grace: float = attrs.field(default=10.0, validator=_seconds)
    lifespan: str = attrs.field(default="auto", validator=_lifespan)
    lifespan_timeout: float = attrs.field(default=30.0, validator=_seconds)
    root_path: str = attrs.field(default="", validator=_root_path)
    receive_bytes: int = attrs.field(default=64 * 1024, validator=_size)
    linger_timeout: float = attrs.field(default=1.0, validator=_seconds)
    backlog: int | None = attrs.field(default=None)

    @backlog.validator
    def _check_backlog(self, attribute: attrs.Attribute[int | None], value: object) -> None:
        if value is not None:
            _size(self, attribute, value)
