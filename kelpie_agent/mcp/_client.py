"""The MCP client: tools from statically configured servers, over the official ``mcp`` SDK.

Each configured server gets one connection, opened on first use (or with :meth:`connect`):
the transport starts the server (production: a subprocess speaking JSON-RPC over stdio), the
SDK's ``ClientSession`` does the ``initialize`` handshake, and the tool list is fetched, all
within the server's ``startup_timeout``. A connection runs in a background task of the client,
so servers can be reconnected independently.

A connection that fails (at start-up, or later because the process died) stays broken: every
call raises :class:`McpConnectionError` naming the cause, until :meth:`reconnect`. A call that
times out leaves the connection usable (the SDK tells the server to cancel the request). A tool
call the server died holding raises :class:`McpCallLostError`, and one that timed out
:class:`McpTimeoutError`: both may have run (``outcome_unknown``), so neither is resent.

The transport is the only thing the simulator replaces: ``kelpie_dst.shims.SimMcpServer``
hands out in-memory streams, so this same code runs in a simulation. See docs/mcp.md.
"""

from __future__ import annotations

import math
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import pydantic
import trio

from ._config import McpServerConfig
from ._errors import (
    McpCallLostError,
    McpConnectionError,
    McpError,
    McpStartupTimeoutError,
    McpTimeoutError,
    McpToolError,
)
from ._tools import McpTool, McpToolResult, check_arguments, result_from_sdk, tool_from_sdk

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.client import Transport

# The ``mcp`` SDK and its types (about a second of imports) load on first use, not with this
# module: ``kelpie serve`` imports the client with the service whether or not any MCP server
# is configured, and every start-up paid for them (docs/decisions.md, Dspeed-12).

__all__ = ["McpClient", "McpTransport", "stdio_transport"]

McpTransport = Callable[[McpServerConfig], "Transport"]
"""Starts the server named by a config and yields the SDK's (read, write) message streams."""

CLIENT_NAME, CLIENT_VERSION = "kelpie", "0.1.0"
_MAX_PAGES = 100
_CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


def stdio_transport(config: McpServerConfig, *, errlog: TextIO | None = None) -> Transport:
    """Start ``config.command`` as a subprocess and talk to it over stdin/stdout (the SDK's
    ``stdio_client``). The server's stderr goes to ``errlog`` (default: ours). A config with a
    ``url`` is reached over Streamable HTTP instead (the SDK's ``streamable_http_client``)."""
    from mcp import StdioServerParameters, stdio_client

    if config.url is not None:
        return _http_transport(config)
    params = StdioServerParameters(
        command=config.command, args=list(config.args), env=config.env_dict, cwd=config.cwd
    )
    return stdio_client(params, errlog=errlog if errlog is not None else sys.stderr)


@asynccontextmanager
async def _http_transport(config: McpServerConfig) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    assert config.url is not None
    async with (
        httpx2.AsyncClient(headers=dict(config.headers), follow_redirects=False) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams[0], streams[1]


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in _leaves(sub)]
    return [error]


def _describe(error: BaseException) -> str:
    """One line for an error that ended a connection, unwrapping exception groups."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    leaves = [e for e in _leaves(error) if not isinstance(e, trio.Cancelled)] or [error]
    first = leaves[0]
    if isinstance(first, MCPError):
        if first.code == types.CONNECTION_CLOSED:
            return "the server closed the connection"
        return f"server error {first.code}: {first.message}"
    if isinstance(first, _CLOSED):
        return "the server closed the connection"
    text = " ".join(str(first).split())
    return f"{type(first).__name__}: {text}" if text else type(first).__name__


class _Connection:
    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.session: ClientSession | None = None
        self.tools: dict[str, McpTool] = {}
        self.broken: str | None = None
        self.lock = trio.Lock()
        self.stop = trio.Event()
        self.done = trio.Event()
        self.done.set()

    @property
    def status(self) -> str:
        if self.broken is not None:
            return "broken"
        return "connected" if self.session is not None else "idle"

    def fail(self, cause: str) -> McpConnectionError:
        if self.broken is None:
            self.broken = cause
        name = self.config.name
        return McpConnectionError(f"mcp server {name!r}: {self.broken}", server=name)


class McpClient:
    """Tools from the MCP servers in ``servers``; use as ``async with McpClient(...) as c``.

    ``transport`` starts a server from its config (default: :func:`stdio_transport`).
    """

    def __init__(
        self, servers: Iterable[McpServerConfig], *, transport: McpTransport = stdio_transport
    ) -> None:
        self._connections: dict[str, _Connection] = {}
        for config in servers:
            if not isinstance(config, McpServerConfig):
                raise TypeError(f"servers must be McpServerConfig objects, got {config!r}")
            if config.name in self._connections:
                raise ValueError(f"mcp server {config.name!r} is configured twice")
            self._connections[config.name] = _Connection(config)
        self._transport = transport
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: AbstractAsyncContextManager[trio.Nursery] | None = None

    async def __aenter__(self) -> McpClient:
        if self._nursery_cm is not None:
            raise RuntimeError("an McpClient can be entered only once")
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        for conn in self._connections.values():
            conn.stop.set()
        assert self._nursery_cm is not None
        try:
            return await self._nursery_cm.__aexit__(exc_type, exc, tb)
        finally:
            self._nursery = None

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(self._connections)

    def status(self, server: str) -> str:
        """``"idle"`` (not started), ``"connected"`` or ``"broken"``."""
        return self._conn(server).status

    def _conn(self, server: str) -> _Connection:
        conn = self._connections.get(server)
        if conn is None:
            known = ", ".join(self._connections) or "none configured"
            raise McpError(f"no mcp server named {server!r} (servers: {known})", server=server)
        return conn

    async def connect(self, server: str) -> None:
        """Start ``server`` if it is idle; raise :class:`McpConnectionError` if it is broken."""
        await self._ready(server)

    async def reconnect(self, server: str) -> None:
        """Stop ``server``'s connection (whatever its state) and start a fresh one."""
        conn = self._conn(server)
        async with conn.lock:
            conn.stop.set()
            await conn.done.wait()
            conn.broken = None
        await self._ready(server)

    async def add_server(self, config: McpServerConfig) -> None:
        """Serve ``config`` from now on, replacing (and stopping) a server of the same name;
        its connection opens lazily, on first use."""
        if not isinstance(config, McpServerConfig):
            raise TypeError(f"expected an McpServerConfig, got {config!r}")
        await self.remove_server(config.name)
        self._connections[config.name] = _Connection(config)

    async def remove_server(self, server: str) -> None:
        """Stop ``server``'s connection (if any) and forget it; unknown names are ignored."""
        conn = self._connections.pop(server, None)
        if conn is None:
            return
        async with conn.lock:
            conn.stop.set()
            await conn.done.wait()

    def config(self, server: str) -> McpServerConfig:
        return self._conn(server).config

    async def _ready(self, server: str) -> tuple[_Connection, ClientSession]:
        conn = self._conn(server)
        async with conn.lock:
            if conn.broken is None and conn.session is None:
                if self._nursery is None:
                    raise RuntimeError("use the McpClient inside 'async with'")
                await self._nursery.start(self._serve, conn)
        if conn.broken is not None or conn.session is None:
            raise conn.fail(conn.broken or "not connected")
        return conn, conn.session

    async def _serve(self, conn: _Connection, task_status: trio.TaskStatus[None]) -> None:
        import mcp_types as types
        from mcp import ClientSession

        config = conn.config
        info = types.Implementation(name=CLIENT_NAME, version=CLIENT_VERSION)
        conn.stop, conn.done = trio.Event(), trio.Event()
        started = False
        startup = trio.CancelScope(deadline=trio.current_time() + config.startup_timeout)
        try:
            with startup:
                async with (
                    self._transport(config) as (read, write),
                    ClientSession(read, write, client_info=info) as session,
                ):
                    await session.initialize()
                    conn.tools = await self._fetch_tools(config.name, session)
                    startup.deadline = math.inf
                    conn.session, started = session, True
                    task_status.started()
                    await conn.stop.wait()
            if startup.cancelled_caught and not started:
                cause = f"did not start within {config.startup_timeout:g}s"
                conn.fail(cause)
                raise McpStartupTimeoutError(
                    f"mcp server {config.name!r}: {cause}", server=config.name
                )
        except McpStartupTimeoutError:
            raise
        except Exception as error:
            failure = conn.fail(("failed to start: " if not started else "") + _describe(error))
            if not started:
                raise failure from None
        finally:
            conn.session = None
            conn.done.set()

    async def _fetch_tools(self, server: str, session: ClientSession) -> dict[str, McpTool]:
        import mcp_types as types

        tools: dict[str, McpTool] = {}
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            for tool in page.tools:
                tools[tool.name] = tool_from_sdk(server, tool)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    # -- tools ----------------------------------------------------------------------------------
    async def list_tools(self, server: str | None = None) -> list[McpTool]:
        """The tools of ``server`` (fetched again), or of every server in configuration order,
        raising the first server's failure."""
        names = [server] if server is not None else list(self._connections)
        listed: list[McpTool] = []
        for name in names:
            conn, session = await self._ready(name)
            with trio.move_on_after(conn.config.call_timeout) as scope:
                conn.tools = await self._guard(conn, "tools/list", self._fetch_tools(name, session))
            if scope.cancelled_caught:
                raise McpTimeoutError(
                    f"mcp server {name!r}: tools/list did not answer within "
                    f"{conn.config.call_timeout:g}s",
                    server=name,
                )
            listed.extend(conn.tools.values())
        return listed

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> McpToolResult:
        """Call ``tool`` on ``server``; the server's ``call_timeout`` applies unless ``timeout``
        is given. Arguments are checked against the tool's schema before anything is sent."""
        import mcp_types as types

        conn, session = await self._ready(server)
        spec = conn.tools.get(tool)
        if spec is None:
            known = ", ".join(sorted(conn.tools)) or "none"
            raise McpToolError(
                f"mcp server {server!r} has no tool {tool!r} (tools: {known})", server=server
            )
        args = check_arguments(spec, {} if arguments is None else arguments)
        limit = conn.config.call_timeout if timeout is None else timeout
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {limit!r}")
        with trio.move_on_after(limit):
            try:
                result = await self._guard(conn, f"tool {tool!r}", session.call_tool(tool, args))
            except McpConnectionError as error:  # it died holding the call, which may have run
                raise McpCallLostError(
                    f"{error} after tool {tool!r} was sent: whether it ran is unknown",
                    server=server,
                ) from None
            assert isinstance(result, types.CallToolResult)
            return result_from_sdk(server, tool, result)
        raise McpTimeoutError(
            f"mcp server {server!r}: tool {tool!r} did not answer within {limit:g}s", server=server
        )

    async def _guard(self, conn: _Connection, what: str, call: Any) -> Any:
        """Await an SDK call, turning its failures into this package's errors."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        name = conn.config.name
        try:
            return await call
        except MCPError as error:
            if error.code == types.CONNECTION_CLOSED:
                raise conn.fail("the server closed the connection") from None
            raise McpToolError(
                f"mcp server {name!r} rejected {what}: {error.message} (code {error.code})",
                server=name,
            ) from None
        except _CLOSED:
            raise conn.fail("the server closed the connection") from None
        except (pydantic.ValidationError, RuntimeError) as error:
            raise McpToolError(
                f"mcp server {name!r} sent an invalid answer to {what}: {_describe(error)}",
                server=name,
            ) from None
