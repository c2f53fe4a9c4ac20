"""``HttpServer``: listeners, connections, lifespan and graceful shutdown.

It accepts on trio listeners (``trio.open_tcp_listeners``), so inside a kelpie_dst simulation
the same code serves on the simulated network. Every connection is an
:class:`~._connection.HttpConnection` task in one nursery; one that fails (a bug) is logged
and never takes the server down.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs
import trio

from ._asgi import ASGIApp, Lifespan
from ._connection import HttpConnection
from ._errors import HttpServerError, LifespanError
from ._log import DEFAULT_LOGGER, AccessLog, AccessRecord, ServerLogger
from ._options import ServerOptions

__all__ = ["HttpServer", "ServerStatistics", "serve", "serve_listeners"]


@attrs.frozen
class ServerStatistics:
    """Counters of one :class:`HttpServer` (``statistics()``)."""

    connections_accepted: int
    connections_open: int
    requests: int
    state: str


class HttpServer:
    """An HTTP/1.1 server for one ASGI application (docs/http-server.md).

    ``logger`` receives application exceptions and server problems (default: the
    ``kelpie_agent.http`` :mod:`logging` logger); ``access_log(record)`` is called once per
    request with an :class:`AccessRecord`. A server serves once: ``serve``/``serve_listeners``
    run until :meth:`shutdown` (graceful) or until cancelled (abrupt).
    """

    def __init__(
        self,
        app: ASGIApp,
        options: ServerOptions | None = None,
        *,
        logger: ServerLogger | None = None,
        access_log: AccessLog | None = None,
    ) -> None:
        self.app = app
        self.options = options if options is not None else ServerOptions()
        if not isinstance(self.options, ServerOptions):
            raise TypeError(f"HttpServer options must be ServerOptions, got {options!r}")
        self.logger: ServerLogger = logger if logger is not None else DEFAULT_LOGGER
        self._access_log = access_log
        self.listeners: list[trio.SocketListener] = []
        self.addresses: list[Any] = []  # the listeners' socket names, kept after they close
        self.closing = False
        self._lifespan = Lifespan(
            app, self.options.lifespan, self.options.lifespan_timeout, self.logger
        )
        self._connections: dict[int, HttpConnection] = {}
        self._ids = itertools.count()
        self._requests_done = 0
        self._accepted = 0
        self._state = "new"  # -> serving -> stopping -> stopped
        self._accept_scope: trio.CancelScope | None = None
        self._connections_scope: trio.CancelScope | None = None
        self._drained = trio.Event()
        self._stopped = trio.Event()

    # -- ServerHost ------------------------------------------------------------------------------
    def lifespan_state(self) -> dict[str, Any]:
        return self._lifespan.state

    def access(self, record: AccessRecord) -> None:
        if self._access_log is None:
            return
        try:
            self._access_log(record)
        except Exception as exc:
            self.logger.warning("the access log callback raised", exc_info=exc)

    # -- information -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port of the first listener (useful after binding port 0)."""
        if not self.addresses:
            raise HttpServerError("the server has no listeners yet")
        return int(self.addresses[0][1])

    def statistics(self) -> ServerStatistics:
        open_requests = sum(conn.requests for conn in self._connections.values())
        return ServerStatistics(
            connections_accepted=self._accepted,
            connections_open=len(self._connections),
            requests=self._requests_done + open_requests,
            state=self._state,
        )

    # -- serving ---------------------------------------------------------------------------------
    async def serve(
        self,
        host: str | None = "127.0.0.1",
        port: int = 8283,
        *,
        task_status: trio.TaskStatus[HttpServer] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (``port=0``: any free port, see :attr:`port`) and serve.

        ``task_status.started(self)`` once the server accepts connections.
        """
        listeners = await trio.open_tcp_listeners(port, host=host, backlog=self.options.backlog)
        await self.serve_listeners(listeners, task_status=task_status)

    async def serve_listeners(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[HttpServer] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve on listeners the caller opened; the server closes them when it stops."""
        if self._state != "new":
            raise HttpServerError(f"an HttpServer serves once (this one is {self._state})")
        self._state = "starting"
        self.listeners = list(listeners)
        self.addresses = [listener.socket.getsockname() for listener in self.listeners]
        failure: LifespanError | None = None
        try:
            async with trio.open_nursery() as root:
                failure = await self._lifespan.startup(root)
                if failure is not None:
                    raise _StartupFailed
                async with trio.open_nursery() as connections:
                    self._connections_scope = connections.cancel_scope
                    await connections.start(self._accept, connections)
                    self._state = "serving" if not self.closing else "stopping"
                    task_status.started(self)
                await self._lifespan.shutdown()
        except* _StartupFailed:
            assert failure is not None
            raise failure from None
        finally:
            for listener in self.listeners:
                await trio.aclose_forcefully(listener)
            self._state = "stopped"
            self._stopped.set()

    async def _accept(
        self,
        nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with trio.CancelScope() as scope:
            self._accept_scope = scope
            if self.closing:
                scope.cancel()  # shutdown() came during startup
            task_status.started()  # the listeners queue connections until accepted
            await trio.serve_listeners(self._handle, self.listeners, handler_nursery=nursery)

    async def serve_stream(self, stream: trio.abc.Stream) -> None:
        """Serve HTTP on one already-open stream until it ends (no listener, no lifespan)."""
        await self._handle(stream)

    async def _handle(self, stream: trio.abc.Stream) -> None:
        number = next(self._ids)
        self._accepted = number + 1
        connection = HttpConnection(self, stream)
        self._connections[number] = connection
        try:
            if self.closing:
                await trio.aclose_forcefully(stream)
                return
            await connection.run()
        except Exception as exc:
            self.logger.error("HTTP connection handler failed (a server bug)", exc_info=exc)
        finally:
            del self._connections[number]
            self._requests_done += connection.requests
            if self.closing and not self._connections:
                self._drained.set()

    # -- stopping ----------------------------------------------------------------------------------
    async def shutdown(self, grace: float | None = None) -> None:
        """Stop gracefully and return once the server has stopped.

        Stops accepting, closes idle keep-alive connections at once, lets requests in flight
        finish (their responses carry ``connection: close``) for up to ``grace`` seconds
        (default ``options.shutdown_grace``), then cancels what is left and runs the lifespan
        shutdown. Call it from outside the server's request handlers.
        """
        if grace is None:
            grace = self.options.shutdown_grace
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
            raise ValueError(f"shutdown grace must be a number of seconds >= 0, got {grace!r}")
        self.closing = True
        if self._state == "new":
            self._state = "stopped"
            self._stopped.set()
            return
        if self._state == "serving":
            self._state = "stopping"
        if self._accept_scope is not None:
            self._accept_scope.cancel()
        if not self._connections:
            self._drained.set()
        for connection in list(self._connections.values()):
            connection.close_if_idle()
        with trio.move_on_after(grace if math.isfinite(grace) else math.inf):
            await self._drained.wait()
        if not self._drained.is_set() and self._connections_scope is not None:
            self.logger.warning(
                "shutdown grace of %ss expired: cancelling %d connection(s)",
                grace,
                len(self._connections),
            )
            self._connections_scope.cancel()
        await self._stopped.wait()


class _StartupFailed(Exception):
    """Unwinds the server's nursery when the lifespan startup failed."""


async def serve(
    app: ASGIApp,
    host: str | None = "127.0.0.1",
    port: int = 8283,
    options: ServerOptions | None = None,
    *,
    logger: ServerLogger | None = None,
    access_log: AccessLog | None = None,
    task_status: trio.TaskStatus[HttpServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled; ``task_status.started(server)`` gives
    the :class:`HttpServer` (for :attr:`HttpServer.port` and :meth:`HttpServer.shutdown`)."""
    server = HttpServer(app, options, logger=logger, access_log=access_log)
    await server.serve(host, port, task_status=task_status)


async def serve_listeners(
    app: ASGIApp,
    listeners: list[trio.SocketListener],
    options: ServerOptions | None = None,
    *,
    logger: ServerLogger | None = None,
    access_log: AccessLog | None = None,
    task_status: trio.TaskStatus[HttpServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Like :func:`serve`, on listeners the caller opened (the server closes them)."""
    server = HttpServer(app, options, logger=logger, access_log=access_log)
    await server.serve_listeners(listeners, task_status=task_status)
