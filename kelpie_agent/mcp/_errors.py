"""Errors raised by the MCP client. Every one derives from :class:`McpError`."""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = [
    "McpArgumentError",
    "McpConfigError",
    "McpConnectionError",
    "McpError",
    "McpStartupTimeoutError",
    "McpTimeoutError",
    "McpToolError",
]


class McpError(KelpieError):
    """Root of the MCP client's errors. ``server`` names the server, when there is one."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message)
        self.server = server


class McpConfigError(McpError):
    """The MCP configuration is invalid (the message names the server and the field)."""


class McpConnectionError(McpError):
    """The server could not be started, or its connection broke (the process died, its pipes
    closed). The connection stays broken, and calls keep raising this, until
    :meth:`McpClient.reconnect`."""


class McpTimeoutError(McpError):
    """The server did not answer in time: at start-up (``startup_timeout``) or to a tool call
    (``call_timeout``). After a call timeout the connection is still usable."""


class McpStartupTimeoutError(McpConnectionError, McpTimeoutError):
    """The server did not start and answer ``initialize`` within ``startup_timeout``.

    Both a timeout and a failed connection: the connection is broken until ``reconnect``."""


class McpToolError(McpError):
    """The server rejected a request (a JSON-RPC error), or the tool is unknown.

    A tool that runs and fails is *not* an error: :class:`McpToolResult` then has
    ``is_error=True``."""


class McpArgumentError(McpToolError):
    """The arguments do not match the tool's input schema; nothing was sent."""
