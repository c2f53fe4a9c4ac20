"""The real letta-client SDK, unmodified, against the app.

* ``AsyncLetta`` runs inside the simulation, over httpx's ASGITransport on trio.
* ``Letta`` (sync) runs on the host and each of its requests steps a persistent simulation
  (``_transport.SimStepTransport``): no server thread, no socket, deterministic.

Both cover agents with memory blocks, JSON and streamed messages, history pagination, blocks,
archival memory, tools, and the SDK's error classes.
"""

from __future__ import annotations

from typing import Any

import httpx
import letta_client
import pytest
from letta_client import AsyncLetta, Letta

import kelpie_dst
from kelpie_dst.shims import LlmTiming, ScriptedPolicy

from ._transport import SimStepTransport
from .harness import BASE, STRICT, api, service_node

ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})
SOURCE = '''def shout(text: str) -> str:
    """Shout it.

    Args:
        text: what to shout
    """
    return text.upper()
'''
# The SDK's own retries sleep through anyio (virtual time in the simulation); none are
# expected, and 4xx answers carry x-should-retry: false.
GUARDS = {**STRICT, "guard_allow": (*STRICT["guard_allow"], "letta_client", "anyio")}


def _blocks() -> list[dict[str, Any]]:
    return [
        {"label": "persona", "value": "I am Otto.", "limit": 500},
        {"label": "human", "value": "Unknown."},
    ]


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # messages.stream
@pytest.mark.dst(seeds=2, **GUARDS)
async def test_async_letta_client_end_to_end() -> None:
    async with api(policy=ECHO, timing=LlmTiming()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        health = await client.health()
        assert health.status == "ok"

        agent = await client.agents.create(
            name="otto", agent_type="letta_v1_agent", memory_blocks=_blocks()
        )
        assert agent.id.startswith("agent-") and [b.label for b in agent.memory.blocks] == [
            "persona",
            "human",
        ]
        assert agent.llm_config.model_endpoint_type == "anthropic"

        reply = await client.agents.messages.create(
            agent.id, messages=[{"role": "user", "content": "hello"}]
        )
        assert [type(m).__name__ for m in reply.messages] == ["AssistantMessage"]
        assert reply.messages[0].content == "echo: hello"
        assert reply.stop_reason.stop_reason == "end_turn" and reply.usage.step_count == 1

        stream = await client.agents.messages.create(
            agent.id, input="streamed", streaming=True, stream_tokens=True
        )
        chunks = [chunk async for chunk in stream]
        kinds = [c.message_type for c in chunks]
        assert kinds[-2:] == ["stop_reason", "usage_statistics"]
        text = "".join(c.content for c in chunks if c.message_type == "assistant_message")
        assert text == "echo: streamed"

        via_stream = await client.agents.messages.stream(agent.id, input="again")
        assert [c.message_type async for c in via_stream][-2:] == [
            "stop_reason",
            "usage_statistics",
        ]

        page = await client.agents.messages.list(agent.id, limit=2, order="asc")
        listed = [m async for m in page]  # auto-pagination: after=<last id> until empty
        every = [m.id for m in listed]
        assert len(every) == 7 and len(set(every)) == 7
        assert listed[0].message_type == "system_message"  # a letta_v1_agent's first message

        block = await client.agents.blocks.retrieve("human", agent_id=agent.id)
        assert block.value == "Unknown."
        updated = await client.agents.blocks.update("human", agent_id=agent.id, value="Ada")
        assert updated.value == "Ada"

        await client.agents.passages.create(agent.id, text="otters hold hands", tags=["a"])
        passages = await client.agents.passages.list(agent.id)
        assert [p.text for p in passages] == ["otters hold hands"]
        found = await client.agents.passages.search(agent.id, query="otters")
        assert found.count == 1 and found.results[0].content == "otters hold hands"

        tool = await client.tools.create(source_code=SOURCE)
        assert tool.name == "shout" and tool.json_schema is not None
        names = [t.name async for t in client.tools.list()]
        assert "shout" in names
        state = await client.agents.tools.attach(tool.id, agent_id=agent.id)
        assert state is None or "shout" in [t.name for t in state.tools]
        attached = [t.name async for t in client.agents.tools.list(agent.id)]
        assert attached[-1] == "shout"

        with pytest.raises(letta_client.NotFoundError):
            await client.agents.retrieve("agent-missing")
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.agents.create(agent_type="nonsense")  # type: ignore[arg-type]
        with pytest.raises(letta_client.ConflictError):
            await client.tools.create(source_code=SOURCE)
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.messages.create("agent-missing", input="x", streaming=True)
        await http.aclose()


def _sync_session(seed: int) -> list[str]:
    """Drive the sync client against a persistent simulation; returns what it saw."""
    seen: list[str] = []
    with kelpie_dst.open_simulation(seed=seed, **GUARDS) as handle:
        box: dict[str, Any] = {}

        async def start() -> None:
            sim = kelpie_dst.current_simulation()
            assert sim is not None
            node = sim.current_node()
            assert node is not None
            ready = __import__("trio").Event()

            async def serve() -> None:
                async with service_node(policy=ECHO) as service:
                    from kelpie_agent.api import create_app

                    box["app"] = create_app(service, api_key="k", observer=kelpie_dst.log)
                    ready.set()
                    await __import__("trio").sleep_forever()

            node.start_soon(serve)
            await ready.wait()

        handle.step(start)
        transport = SimStepTransport(handle, box["app"])
        with httpx.Client(transport=transport, base_url=BASE) as http:
            client = Letta(base_url=BASE, api_key="k", http_client=http, max_retries=0)
            agent = client.agents.create(
                name="sync", agent_type="letta_v1_agent", memory_blocks=_blocks()
            )
            seen.append(agent.id)
            for i in range(3):
                reply = client.agents.messages.create(agent.id, input=f"n{i}")
                seen.append(reply.messages[0].content)  # type: ignore[union-attr]
            stream = client.agents.messages.create(agent.id, input="s", streaming=True)
            seen += [c.message_type for c in stream]
            ids = [m.id for m in client.agents.messages.list(agent.id, limit=3)]
            assert len(ids) == 9 and len(set(ids)) == 9  # the system message, 4 inputs, 4 replies
            seen.append(str(len(ids)))
            assert client.agents.blocks.retrieve("persona", agent_id=agent.id).limit == 500
            client.agents.passages.create(agent.id, text="a passage")
            seen.append(client.agents.passages.search(agent.id, query="passage").results[0].id)
            with pytest.raises(letta_client.AuthenticationError):
                Letta(base_url=BASE, http_client=http, max_retries=0).agents.list()
            with pytest.raises(letta_client.BadRequestError):
                client.tools.delete(client.tools.list().items[0].id)
            seen.append(handle.trace_hash)
    return seen


def test_sync_letta_client_through_a_stepped_simulation() -> None:
    """Same seed, same answers and the same trace hash; the sync SDK works unmodified."""
    first = _sync_session(3)
    assert first[1:4] == ["echo: n0", "echo: n1", "echo: n2"]
    assert first[4:6] == ["assistant_message", "stop_reason"]
    assert first == _sync_session(3)
