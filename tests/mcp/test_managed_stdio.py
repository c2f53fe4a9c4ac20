"""An MCP server managed through the API in production: real SQLite, system ports, the real
``mcp`` SDK starting ``tests/mcp/servers/echo_server.py`` as a subprocess, letta-client in
front. Env reaches the server (and is masked in answers), a tool runs, delete stops it."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
import trio
from letta_client import AsyncLetta

from kelpie_agent.api import create_app
from kelpie_agent.mcp import McpToolError
from kelpie_agent.ports import system_ports
from kelpie_agent.service import open_agent_node
from kelpie_agent.storage import SqliteKV
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient

SERVER = str(Path(__file__).parent / "servers" / "echo_server.py")


@pytest.mark.trio
async def test_a_managed_stdio_server_end_to_end(tmp_path: Path) -> None:
    kv = await SqliteKV.open(tmp_path / "kelpie.db")
    llm = SimLlmClient(HelpfulPolicy(), timing=LlmTiming.instant())
    try:
        async with open_agent_node(kv, system_ports(), node_id="n1", llm=llm) as service:
            app = create_app(service)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://k.test") as http:
                client = AsyncLetta(base_url="http://k.test", http_client=http, max_retries=0)
                server = await client.mcp_servers.create(
                    server_name="echo",
                    config={
                        "command": sys.executable,
                        "args": [SERVER],
                        "env": {"KELPIE_MCP_TEST": "seen"},
                    },
                )
                assert server.env == {"KELPIE_MCP_TEST": "****"}  # type: ignore[union-attr]
                assert server.id is not None
                tools = {t.name: t for t in await client.mcp_servers.tools.list(server.id)}
                assert {"echo", "add", "env"} <= set(tools)
                ran = await client.mcp_servers.tools.run(
                    tools["env"].id, mcp_server_id=server.id, args={"name": "KELPIE_MCP_TEST"}
                )
                assert (ran.status, ran.func_return) == ("success", "seen")
                assert service.mcp_servers.client.status("echo") == "connected"
                with trio.fail_after(30):
                    await client.mcp_servers.delete(server.id)
                assert "echo" not in service.mcp_servers.client.servers
                with pytest.raises(McpToolError, match="does not exist"):
                    await service.mcp_servers.call_tool("echo", "echo", {"text": "x"})
    finally:
        await kv.close()
