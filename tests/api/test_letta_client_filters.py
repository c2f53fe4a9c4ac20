"""The list filters letta-client sends that Kelpie used to ignore, ``messages.search`` and
``agents.recompile``, through the SDK with strict response validation: agents.list
``identity_id`` and ``last_stop_reason``; tools.list ``tool_types``, ``exclude_tool_types``,
``names``, ``tool_ids``, ``search``, ``return_only_letta_tools``; blocks.list
``label_search``, ``value_search``, ``description_search``, ``connected_to_agents_count_*``.
Each takes effect, or is refused naming it (a 422: filters on what Kelpie does not have),
never silently ignored; ``agents.create`` with a missing identity or folder is a 404 that
creates nothing.
"""

from __future__ import annotations

import json

import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.agent._identities import link_key
from kelpie_dst.shims import LlmTiming, ScriptedPolicy

from .harness import BASE, api
from .test_letta_client import GUARDS, SOURCE

letta_client._base_client.get_platform()
IDENTITY = "identity-00000000-0000-4000-8000-000000000001"
# echoes, but "hello" starts a tool call: with max_steps=1 that run stops for max_steps
POLICY = ScriptedPolicy.from_dict(
    {
        "rules": [
            {
                "when": {"user": "hello"},
                "tool_calls": [{"name": "conversation_search", "input": {"query": "x"}}],
            },
            {"text": "echo: {text}"},
        ]
    }
)


async def scenario() -> list[str]:
    seen: list[str] = []
    async with api(policy=POLICY, timing=LlmTiming()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )
        shared = await client.blocks.create(label="team", value="Blue Team", description="Crew")
        lonely = await client.blocks.create(label="notes", value="nothing", description="misc")
        otto = await client.agents.create(name="otto", block_ids=[shared.id])
        ada = await client.agents.create(name="ada", block_ids=[shared.id])
        eve = await client.agents.create(name="eve")
        await client.agents.messages.create(otto.id, input="hi")
        await client.agents.messages.create(ada.id, input="hello", max_steps=1)

        # agents.list: identity_id (the agents attached to it), last_stop_reason
        async with a.service.kv.transaction() as txn:
            await txn.set(link_key(IDENTITY, eve.id), b"")
        assert [x.id async for x in client.agents.list(identity_id=IDENTITY)] == [eve.id]
        assert [x.id async for x in client.agents.list(last_stop_reason="end_turn")] == [otto.id]
        stopped = [x.id async for x in client.agents.list(last_stop_reason="max_steps")]
        assert stopped == [ada.id]
        both = client.agents.list(identity_id=IDENTITY, last_stop_reason="end_turn")
        assert [x.id async for x in both] == []
        with pytest.raises(letta_client.UnprocessableEntityError, match="project_id"):
            await client.agents.list(project_id="proj-1")
        with pytest.raises(letta_client.NotFoundError, match=IDENTITY):
            await client.agents.create(name="x", identity_ids=[IDENTITY])
        with pytest.raises(letta_client.NotFoundError, match="source-1"):
            await client.agents.create(name="x", folder_ids=["source-1"])
        assert len([x async for x in client.agents.list()]) == 3  # nothing was created

        # messages.search: ranked across agents, filtered by agent
        hits = await client.messages.search(query="hello", search_mode="fts")
        assert [(h.agent_id, h.message_type) for h in hits] == [(ada.id, "user_message")]
        echoed = await client.messages.search(query="echo", search_mode="fts")
        assert [(h.agent_id, h.message_type, h.content) for h in echoed] == [  # type: ignore[union-attr]
            (otto.id, "assistant_message", "echo: hi")
        ]
        assert (
            await client.messages.search(query="hello", agent_id=otto.id, search_mode="fts") == []
        )
        ranked = await client.messages.search(query="hello there", limit=2)
        assert len(ranked) == 2 and ranked[0].agent_id == ada.id
        with pytest.raises(letta_client.NotFoundError):
            await client.messages.search(query="x", conversation_id="conv-1")

        # agents.recompile: the system prompt from the agent's current memory
        # Letta answers a JSON string (response_model=str) and letta-client 1.12.1 hands back
        # the body's text as it is, so the SDK's value is the JSON-quoted prompt, as with Letta
        raw = await client.agents.recompile(otto.id)
        assert raw.startswith('"') and isinstance(prompt := json.loads(raw), str)
        assert "Blue Team" in prompt and "<memory_blocks>" in prompt
        await client.blocks.update(shared.id, value="Red Team")
        again = json.loads(await client.agents.recompile(otto.id, dry_run=True))
        assert "Red Team" in again and "Blue Team" not in again
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.recompile("agent-00000000-0000-4000-8000-000000000000")
        seen.append(again)

        # tools.list
        custom = await client.tools.create(source_code=SOURCE)
        every = [t async for t in client.tools.list(limit=100)]
        assert len(every) > 2
        mine = [t.id async for t in client.tools.list(tool_types=["custom"])]
        assert mine == [custom.id]
        rest = [t.id async for t in client.tools.list(exclude_tool_types=["custom"], limit=100)]
        assert rest == [t.id for t in every if t.id != custom.id]
        named = client.tools.list(names=["shout", "send_message"], order="asc")
        assert sorted([t.name async for t in named]) == ["send_message", "shout"]
        assert [t.name async for t in client.tools.list(search="SHO")] == ["shout"]
        assert [t.id async for t in client.tools.list(tool_ids=[custom.id])] == [custom.id]
        letta = [t async for t in client.tools.list(return_only_letta_tools=True, limit=100)]
        assert letta and all((t.tool_type or "").startswith("letta_") for t in letta)

        # blocks.list
        assert [b.id async for b in client.blocks.list(label_search="TEA")] == [shared.id]
        assert [b.id async for b in client.blocks.list(value_search="nothing")] == [lonely.id]
        assert [b.id async for b in client.blocks.list(description_search="crew")] == [shared.id]
        two = client.blocks.list(connected_to_agents_count_gt=1)
        assert [b.id async for b in two] == [shared.id]
        none = client.blocks.list(connected_to_agents_count_eq=[0], label_search="notes")
        assert [b.id async for b in none] == [lonely.id]
        assert [b.id async for b in client.blocks.list(connected_to_agents_count_lt=0)] == []
        with pytest.raises(letta_client.UnprocessableEntityError, match="tags"):
            await client.blocks.list(tags=["x"])
        seen += [otto.id, ada.id, eve.id, custom.id, shared.id, lonely.id]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


def test_list_filters_through_letta_client_deterministically() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1,), runs=2, **GUARDS)
