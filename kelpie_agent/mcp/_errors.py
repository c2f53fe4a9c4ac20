"""Errors raised by the MCP client. Every one derives from :class:`McpError`."""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = [
    "McpArgumentError",
    "McpCallLostError",
    "McpConfigError",
    "McpConnectionError",
    "McpError",
    "McpStartupTimeoutError",
    "McpTimeoutError",
    "McpToolError",
]


class McpError(KelpieError):
    """Root of the MCP client's errors. ``server`` names the server, when there is one.

    ``outcome_unknown`` is true for a tool call that was sent and may have run (it timed out,
    or the server died while it held it): such a call must not be sent again, or its effect
    may happen twice."""

    outcome_unknown = False

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
    (``call_timeout``). After a call timeout the connection is still usable, and the call may
    have run."""

    outcome_unknown = True


class McpCallLostError(McpConnectionError):
    """The connection broke after a tool call was sent: the server may have run it before it
    died. The connection is broken until :meth:`McpClient.reconnect`, as for any
    :class:`McpConnectionError`."""

    outcome_unknown = True


class McpStartupTimeoutError(McpConnectionError, McpTimeoutError):
    """The server did not start and answer ``initialize`` within ``startup_timeout``.

    Both a timeout and a failed connection: the connection is broken until ``reconnect``.
    Nothing was called yet."""

    outcome_unknown = False


class McpToolError(McpError):
    """The server rejected a request (a JSON-RPC error), or the tool is unknown.

    A tool that runs and fails is *not* an error: :class:`McpToolResult` then has
    ``is_error=True``."""


class McpArgumentError(McpToolError):
    """The arguments do not match the tool's input schema; nothing was sent."""
