"""MCP servers managed through the real letta-client (strict validation): create, list,
retrieve, update (masked secrets kept), refresh (tools updated in place, agents keep them),
tools list/retrieve/run, an agent calling a managed server's tool, delete (calls then end with a
tool error, never a crash). The servers are ``SimMcpServer``s. Same seed, same trace hash."""

from __future__ import annotations

import json
import random
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.llm import LlmRequest, ToolResult
from kelpie_agent.mcp import McpServerConfig, McpToolError
from kelpie_dst.shims._mcp import SimMcpServer, parse_tools, sim_mcp_transport
from kelpie_dst.shims.llm import Call, Reply

from .harness import BASE, STRICT, api

GUARDS = {**STRICT, "guard_allow": (*STRICT["guard_allow"], "letta_client", "anyio")}
PAIR = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def _add(args: dict[str, Any]) -> str:
    return str(int(args["a"]) + int(args["b"]))


def calc_server() -> SimMcpServer:
    tools = [
        {"name": "add", "description": "Add.", "input_schema": PAIR, "response": _add},
        {"name": "neg", "description": "Negate.", "input_schema": PAIR, "response": {"text": "0"}},
    ]
    return SimMcpServer("calc", tools, latency=(0.01, 0.05), start_latency=0.02)


@attrs.define
class AddPolicy:
    """Calls ``add`` once; once its result is back, answers with it."""

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
        if results:
            return (f"result: {json.loads(results[-1].content)['message']}",)
        return (Call("add", {"a": 2, "b": 3}),)


@attrs.define
class Recorder:
    """The sim transport, noting each config it starts a server with."""

    server: SimMcpServer
    configs: list[McpServerConfig] = attrs.Factory(list)

    def __call__(self, config: McpServerConfig) -> AbstractAsyncContextManager[Any]:
        self.configs.append(config)
        return sim_mcp_transport(self.server)(config)


async def mcp_flow() -> list[str]:
    seen: list[str] = []
    server = calc_server()
    recorder = Recorder(server)
    async with api(policy=AddPolicy(), mcp_transport=recorder) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        created = await client.mcp_servers.create(
            server_name="calc",
            config={"command": "calc-server", "args": ["--fast"], "env": {"TOKEN": "s3cret"}},
        )
        assert created.mcp_server_type == "stdio" and created.id is not None
        assert created.env == {"TOKEN": "****"}  # type: ignore[union-attr]
        sid = created.id
        listed = await client.mcp_servers.list()
        assert [s.id for s in listed] == [sid]
        got = await client.mcp_servers.retrieve(sid)
        assert got.server_name == "calc" and got.args == ["--fast"]  # type: ignore[union-attr]
        assert recorder.configs[-1].env_dict == {"TOKEN": "s3cret"}

        tools = await client.mcp_servers.tools.list(sid)
        assert sorted(t.name for t in tools) == ["add", "neg"]
        add = next(t for t in tools if t.name == "add")
        assert add.tool_type == "external_mcp"
        assert (await client.mcp_servers.tools.retrieve(add.id, mcp_server_id=sid)).name == "add"
        ran = await client.mcp_servers.tools.run(add.id, mcp_server_id=sid, args={"a": 4, "b": 5})
        assert ran.status == "success" and ran.func_return == "9"
        bad = await client.mcp_servers.tools.run(add.id, mcp_server_id=sid, args={"a": "x"})
        assert bad.status == "error" and "bad arguments" in bad.func_return

        agent = await client.agents.create(name="adder", tool_ids=[add.id])
        reply = await client.agents.messages.create(agent.id, input="add 2 and 3")
        returns = [m for m in reply.messages if m.message_type == "tool_return_message"]
        assert returns and returns[0].status == "success" and "5" in returns[0].tool_return  # type: ignore[union-attr]

        # update: a masked secret sent back keeps its value; the next call uses the new config
        updated = await client.mcp_servers.update(
            sid, config={"args": ["--slow"], "command": None, "env": {"TOKEN": "****"}}
        )
        assert updated.args == ["--slow"]  # type: ignore[union-attr]
        ran = await client.mcp_servers.tools.run(add.id, mcp_server_id=sid, args={"a": 1, "b": 1})
        assert ran.status == "success"
        last = recorder.configs[-1]
        assert last.args == ("--slow",) and last.env_dict == {"TOKEN": "s3cret"}
        with pytest.raises(letta_client.BadRequestError, match="server_url"):
            await client.mcp_servers.update(sid, config={"server_url": "http://x.test/mcp"})  # type: ignore[typeddict-item]

        # refresh: "neg" vanished, "mul" is new, "add" keeps its id (the agent keeps it)
        del server.tools["neg"]
        server.tools.update(
            parse_tools(
                [{"name": "mul", "input_schema": PAIR, "response": {"text": "6"}}],
                "t",
                server.latency,
            )
        )
        summary = await client.mcp_servers.refresh(sid)
        assert summary == {"added": ["mul"], "updated": [], "deleted": ["neg"]}
        names = {t.name: t.id for t in await client.mcp_servers.tools.list(sid)}
        assert sorted(names) == ["add", "mul"] and names["add"] == add.id
        attached = [t.id async for t in client.agents.tools.list(agent.id)]
        assert add.id in attached

        # bad input: one 422 naming the field; nothing stored
        with pytest.raises(letta_client.UnprocessableEntityError, match="server_name"):
            await client.mcp_servers.create(
                server_name="bad name", config={"command": "x", "args": []}
            )
        with pytest.raises(letta_client.ConflictError, match="calc"):
            await client.mcp_servers.create(server_name="calc", config={"command": "x", "args": []})
        assert len(await client.mcp_servers.list()) == 1

        # delete: the record and tools go; a call racing it ends with a tool error
        await client.mcp_servers.delete(sid)
        with pytest.raises(letta_client.NotFoundError):
            await client.mcp_servers.retrieve(sid)
        assert "add" not in [t.name async for t in client.tools.list()]
        assert "calc" not in a.service.mcp_servers.client.servers
        with pytest.raises(McpToolError, match="does not exist"):
            await a.service.mcp_servers.call_tool("calc", "add", {"a": 1, "b": 2})
        after = await client.agents.messages.create(agent.id, input="add again")
        assert after.stop_reason is not None
        seen += [f"{s.id} {s.server_name}" for s in listed]
        seen += [f"{t}={i}" for t, i in sorted(names.items())]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_mcp_servers_through_letta_client() -> None:
    await mcp_flow()


def test_mcp_servers_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(mcp_flow, seeds=(1,), runs=2, **GUARDS)


async def sse_update_flow() -> None:
    """An SSE server is stored (Kelpie cannot connect to it, and says so when it is used), so
    it can be updated too: a rename or a new URL is answered with the server, not a 500 (the
    update used to try to connect after storing the change)."""
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        made = await client.mcp_servers.create(
            server_name="old-sse",
            config={
                "mcp_server_type": "sse",
                "server_url": "http://sse.test/sse",
                "auth_header": "X-Token",
                "auth_token": "t0ken",
            },
        )
        renamed = await client.mcp_servers.update(
            made.id, server_name="new-sse", config={"mcp_server_type": "sse"}
        )
        assert renamed.server_name == "new-sse" and renamed.auth_token == "****"  # type: ignore[union-attr]
        moved = await client.mcp_servers.update(
            made.id, config={"mcp_server_type": "sse", "server_url": "http://sse.test/v2"}
        )
        assert moved.server_url == "http://sse.test/v2"  # type: ignore[union-attr]
        got = await client.mcp_servers.retrieve(made.id)
        assert got.server_name == "new-sse" and got.mcp_server_type == "sse"
        await http.aclose()


@pytest.mark.dst(seeds=1, **GUARDS)
async def test_an_sse_server_can_be_updated() -> None:
    await sse_update_flow()
