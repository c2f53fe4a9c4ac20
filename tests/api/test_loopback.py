"""The app on real sockets: Kelpie's HTTP server (``kelpie_agent.http``) on 127.0.0.1, a real
SQLite file, production ports, and the deterministic sim model; the unmodified letta-client
SDK, async in the same trio run and sync from the host thread (the server then runs in a
thread of the test, never of kelpie_agent)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
import trio
from letta_client import AsyncLetta, Letta

from kelpie_agent.api import create_app
from kelpie_agent.http import HttpServer, serve
from kelpie_agent.ports import system_ports
from kelpie_agent.service import open_agent_node
from kelpie_agent.storage import SqliteKV
from kelpie_dst.shims import LlmTiming, ScriptedPolicy, SimLlmClient

ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})
BLOCKS = [{"label": "persona", "value": "I am Otto."}, {"label": "human", "value": ""}]


@asynccontextmanager
async def served(db: Path, timing: LlmTiming | None = None) -> AsyncIterator[str]:
    kv = await SqliteKV.open(db)
    llm = SimLlmClient(ECHO, timing=timing or LlmTiming.instant())
    try:
        async with (
            open_agent_node(kv, system_ports(), node_id="loopback", llm=llm) as service,
            trio.open_nursery() as nursery,
        ):
            app = create_app(service, api_key="key")
            server: HttpServer = await nursery.start(partial(serve, app, "127.0.0.1", 0))
            try:
                yield f"http://127.0.0.1:{server.port}"
            finally:
                await server.shutdown(grace=2)
    finally:
        await kv.close()


@pytest.mark.trio
async def test_async_sdk_over_loopback(tmp_path: Path) -> None:
    async with served(tmp_path / "kelpie.db") as url, httpx.AsyncClient() as http:
        client = AsyncLetta(base_url=url, api_key="key", http_client=http)
        agent = await client.agents.create(
            name="lo", agent_type="letta_v1_agent", memory_blocks=BLOCKS
        )
        reply = await client.agents.messages.create(agent.id, input="over the wire")
        assert reply.messages[0].content == "echo: over the wire"  # type: ignore[union-attr]
        stream = await client.agents.messages.create(
            agent.id, input="streamed", streaming=True, stream_tokens=True
        )
        pieces = [c async for c in stream]
        assert pieces[-1].message_type == "usage_statistics"
        text = "".join(c.content for c in pieces if c.message_type == "assistant_message")
        assert text == "echo: streamed"
        ids = [m.id async for m in client.agents.messages.list(agent.id, limit=1)]
        assert len(ids) == 5  # the system message, 2 inputs, 2 replies
        with pytest.raises(letta_client.AuthenticationError):
            await AsyncLetta(base_url=url, http_client=http).agents.list()


@pytest.mark.trio
async def test_a_client_leaving_mid_stream_does_not_stop_the_run(tmp_path: Path) -> None:
    slow = LlmTiming(ttft_min=0.05, ttft_max=0.05, tokens_per_second=40.0)
    async with served(tmp_path / "kelpie.db", slow) as url:
        headers = {"Authorization": "Bearer key"}
        async with httpx.AsyncClient(base_url=url, headers=headers) as http:
            agent = (await http.post("/v1/agents/", json={"agent_type": "letta_v1_agent"})).json()[
                "id"
            ]
            body = {"input": "a fairly long sentence to stream", "stream_tokens": True}
            async with http.stream("POST", f"/v1/agents/{agent}/messages/stream", json=body) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        first = json.loads(line[6:])
                        break
            assert first["message_type"] == "assistant_message"
            assert first["content"] != "echo: a fairly long sentence to stream"  # a piece
            with trio.fail_after(10):
                while True:
                    page = (await http.get(f"/v1/agents/{agent}/messages")).json()
                    if page and page[0]["message_type"] == "assistant_message":
                        break
                    await trio.sleep(0.05)
            assert page[0]["content"] == "echo: a fairly long sentence to stream"


def test_sync_sdk_over_loopback(tmp_path: Path) -> None:
    started = threading.Event()
    box: dict[str, Any] = {}

    async def server_main() -> None:
        async with served(tmp_path / "kelpie.db") as url:
            box["url"], box["token"] = url, trio.lowlevel.current_trio_token()
            box["stop"] = trio.Event()
            started.set()
            await box["stop"].wait()

    thread = threading.Thread(target=trio.run, args=(server_main,), daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        client = Letta(base_url=box["url"], api_key="key")
        agent = client.agents.create(name="sync", memory_blocks=BLOCKS)
        assert client.agents.retrieve(agent.id).name == "sync"
        reply = client.agents.messages.create(agent.id, input="hi")
        assert reply.messages[-1].content == "echo: hi"  # type: ignore[union-attr]
        chunks = list(client.agents.messages.create(agent.id, input="s", streaming=True))
        assert [c.message_type for c in chunks][-2:] == ["stop_reason", "usage_statistics"]
        block = client.agents.blocks.update("human", agent_id=agent.id, value="Ada")
        assert block.value == "Ada"
        with pytest.raises(letta_client.NotFoundError):
            client.agents.retrieve("agent-nope")
    finally:
        trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
        thread.join(30)
