"""McpClient against a real MCP server subprocess (the official SDK's MCPServer) under trio."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest
import trio

from kelpie_agent.mcp import (
    McpClient,
    McpConnectionError,
    McpServerConfig,
    McpStartupTimeoutError,
    McpTimeoutError,
    stdio_transport,
)
from kelpie_agent.mcp.testing import CHECKS, check_mcp_conformance

SERVER = str(Path(__file__).parent / "servers" / "echo_server.py")


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    """The servers' stderr, shown if a test fails."""
    path = tmp_path / "server-stderr.log"
    with path.open("w") as log:
        yield log
    print(path.read_text()[-3000:])


def echo_config(**fields: object) -> McpServerConfig:
    return McpServerConfig("echo", sys.executable, [SERVER], **fields)  # type: ignore[arg-type]


@pytest.mark.trio
async def test_conformance_against_a_real_server(errlog: TextIO) -> None:
    transport = functools.partial(stdio_transport, errlog=errlog)
    async with McpClient([echo_config(startup_timeout=60)], transport=transport) as client:
        await check_mcp_conformance(client, "echo")
    assert list(CHECKS)[-1] == "reconnect"  # so the server was started twice


@pytest.mark.trio
async def test_env_reaches_the_server_and_a_crash_breaks_the_connection(errlog: TextIO) -> None:
    config = echo_config(env={"KELPIE_MCP_TEST": "seen"}, startup_timeout=60)
    transport = functools.partial(stdio_transport, errlog=errlog)
    async with McpClient([config], transport=transport) as client:
        result = await client.call_tool("echo", "env", {"name": "KELPIE_MCP_TEST"})
        assert result.text == "seen"
        with pytest.raises(McpConnectionError, match="closed the connection"):
            await client.call_tool("echo", "crash")
        assert client.status("echo") == "broken"
        with pytest.raises(McpConnectionError, match="closed the connection"):
            await client.call_tool("echo", "echo", {"text": "later"})  # fails until reconnect
        await client.reconnect("echo")
        assert (await client.call_tool("echo", "echo", {"text": "back"})).text == "back"


@pytest.mark.trio
async def test_a_missing_command_is_a_one_line_connection_error() -> None:
    config = McpServerConfig("ghost", "/nonexistent/kelpie-mcp-server")
    async with McpClient([config]) as client:
        with pytest.raises(McpConnectionError) as caught:
            await client.connect("ghost")
        message = str(caught.value)
        assert message.startswith("mcp server 'ghost': failed to start: FileNotFoundError")
        assert "\n" not in message and caught.value.server == "ghost"
        assert client.status("ghost") == "broken"
        with pytest.raises(McpConnectionError, match="failed to start"):
            await client.list_tools("ghost")


@pytest.mark.trio
async def test_a_server_that_never_answers_times_out_at_startup(errlog: TextIO) -> None:
    silent = McpServerConfig(
        "silent", sys.executable, ["-c", "import sys; sys.stdin.read()"], startup_timeout=0.5
    )
    transport = functools.partial(stdio_transport, errlog=errlog)
    async with McpClient([silent], transport=transport) as client:
        start = trio.current_time()
        with pytest.raises(McpStartupTimeoutError, match=r"did not start within 0\.5s") as caught:
            await client.connect("silent")
        assert isinstance(caught.value, McpTimeoutError)
        assert trio.current_time() - start >= 0.5
        assert client.status("silent") == "broken"
