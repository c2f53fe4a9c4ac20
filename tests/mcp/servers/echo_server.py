"""A tiny real MCP server over stdio, written with the official SDK's ``MCPServer``.

The tests start it as a subprocess (``python tests/mcp/servers/echo_server.py``). Tools:

* ``echo(text)`` returns ``text``;
* ``add(a, b)`` returns ``a + b`` as text;
* ``env(name)`` returns the value of an environment variable (checks ``env`` configuration);
* ``sleep(seconds)`` sleeps, then returns ``"slept"`` (checks client timeouts);
* ``fail(message)`` raises, so the server answers with ``isError``;
* ``crash()`` kills the server process at once (checks how the client sees a dead server).
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def env(name: str) -> str:
    """Return an environment variable of the server process (empty if unset)."""
    return os.environ.get(name, "")


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep for ``seconds``, then answer."""
    await anyio.sleep(seconds)
    return "slept"


@server.tool()
def fail(message: str) -> str:
    """Always fail with ``message``."""
    raise ValueError(message)


@server.tool()
def crash() -> str:
    """Kill this server process without answering."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
