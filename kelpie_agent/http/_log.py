"""What the server reports: one :class:`AccessRecord` per request, and problems to a logger.

``logging`` stamps every record with the wall clock, so in a simulation pass a logger of your
own (anything with ``error``/``warning``/``info``/``debug`` like :class:`logging.Logger`) or
accept that the guards redirect those reads (docs/http-server.md, "Logging").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs

__all__ = ["DEFAULT_LOGGER", "AccessLog", "AccessRecord", "ServerLogger"]

DEFAULT_LOGGER = logging.getLogger("kelpie_agent.http")


class ServerLogger(Protocol):
    """The part of :class:`logging.Logger` the server uses."""

    def error(self, msg: object, *args: object, exc_info: Any = ...) -> None: ...

    def warning(self, msg: object, *args: object, exc_info: Any = ...) -> None: ...

    def info(self, msg: object, *args: object, exc_info: Any = ...) -> None: ...

    def debug(self, msg: object, *args: object, exc_info: Any = ...) -> None: ...


@attrs.frozen
class AccessRecord:
    """One request as the server saw it.

    ``method`` and ``target`` are ``"-"`` for a request that could not be parsed (the server
    answered it 400/408/431 itself). ``status`` is ``0`` when no response status was sent
    (the client went away first). ``bytes_sent`` counts response body bytes. ``duration`` is
    seconds of trio time from the request's arrival to the end of its response.
    """

    client: str
    method: str
    target: str
    http_version: str
    status: int
    bytes_sent: int
    duration: float

    def line(self) -> str:
        """``127.0.0.1:50112 "GET /v1/health/ HTTP/1.1" 200 33 0.8ms``."""
        return (
            f'{self.client} "{self.method} {self.target} HTTP/{self.http_version}" '
            f"{self.status or '-'} {self.bytes_sent} {self.duration * 1000:.1f}ms"
        )


AccessLog = Callable[[AccessRecord], object]
