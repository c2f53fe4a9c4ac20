"""A new agent's first messages through letta-client with strict response validation, as
Letta stores them (issue #17): the compiled system message first, for every agent type; then
for memgpt and react agents the boot ``send_message`` and the login event;
``initial_message_sequence`` instead of the boot messages; the system message rewritten in
place by recompile (not by a dry run) and after memory changes; never shown to the model as a
turn; each conversation and fork with its own; kept by an export/import round trip. The same
seed twice gives the same trace."""

from __future__ import annotations

import json
import random

import httpx
import letta_client
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.agent import BOOT_MESSAGE, BOOT_THOUGHT
from kelpie_agent.llm import LlmRequest, TextBlock, ToolCall
from kelpie_dst.shims import LlmTiming, ScriptedPolicy
from kelpie_dst.shims.llm import Call

from .harness import BASE, api
from .test_letta_client import GUARDS

letta_client._base_client.get_platform()
ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})
HELLO = ScriptedPolicy.from_dict(
    {
        "mode": "scripted",
        "rules": [
            {"when": {"tool": "send_message"}, "text": "(sent)"},
            {"tool_calls": [{"name": "send_message", "input": {"message": "hi!"}}]},
        ],
    }
)
BLOCKS = [{"label": "persona", "value": "I am Otto."}, {"label": "human", "value": "Unknown."}]


class Recording:
    """Answers like ECHO (letta_v1) or HELLO (memgpt), keeping every request."""

    def __init__(self) -> None:
        self.requests: list[LlmRequest] = []

    def respond(self, request: LlmRequest, rng: random.Random) -> tuple[str | Call, ...]:
        self.requests.append(request)
        offered = {t.name for t in request.tools}
        return (HELLO if "send_message" in offered else ECHO).respond(request, rng)


def _types(messages: list[letta_client.types.agents.Message]) -> list[str]:
    return [m.message_type for m in messages]


async def scenario() -> list[str]:
    seen: list[str] = []
    policy = Recording()
    async with api(policy=policy, timing=LlmTiming()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )

        async def listed(
            agent_id: str, **options: object
        ) -> list[letta_client.types.agents.Message]:
            page = client.agents.messages.list(agent_id, order="asc", **options)  # type: ignore[arg-type]
            return [m async for m in page]

        # letta_v1_agent: the compiled system message alone
        v1 = await client.agents.create(
            name="v1", agent_type="letta_v1_agent", memory_blocks=BLOCKS
        )
        [system] = await listed(v1.id)
        assert system.message_type == "system_message" and system.run_id is None
        assert "<memory_blocks>" in system.content and "I am Otto." in system.content
        assert "0 previous messages" in system.content

        # memgpt_agent and react_agent: then the boot send_message and the login event
        for agent_type in ("memgpt_agent", "react_agent"):
            agent = await client.agents.create(
                name=agent_type, agent_type=agent_type, memory_blocks=BLOCKS
            )
            shown = await listed(agent.id)
            assert _types(shown) == [
                "system_message",
                "reasoning_message",
                "assistant_message",
                "user_message",
            ]
            assert shown[1].reasoning == BOOT_THOUGHT and shown[2].content == BOOT_MESSAGE
            assert json.loads(shown[3].content)["type"] == "login"
            raw = await listed(agent.id, use_assistant_message=False)
            assert _types(raw)[1:] == [
                "reasoning_message",
                "tool_call_message",
                "tool_return_message",
                "user_message",
            ]
            assert raw[2].tool_call.name == "send_message"
            assert raw[3].tool_call_id == raw[2].tool_call.tool_call_id
            assert {m.run_id for m in raw} == {None}
            seen += [m.id for m in raw]
        memgpt = (await client.agents.list(name="memgpt_agent")).items[0]

        # The model sees the boot exchange as turns, and its system prompt once, as the system
        reply = await client.agents.messages.create(memgpt.id, input="hello")
        assert reply.stop_reason.stop_reason == "end_turn"
        first = policy.requests[0]
        assert "<memory_blocks>" in first.system
        texts = [b.text for m in first.messages for b in m.content if isinstance(b, TextBlock)]
        assert not any("<memory_blocks>" in t for t in texts)
        assert BOOT_THOUGHT in texts and any("login" in t for t in texts)
        calls = [b for m in first.messages for b in m.content if isinstance(b, ToolCall)]
        assert [c.name for c in calls] == ["send_message"]

        # initial_message_sequence replaces the boot messages; [] leaves the system message
        given = await client.agents.create(
            name="given",
            agent_type="memgpt_agent",
            initial_message_sequence=[{"role": "user", "content": "we met before"}],
        )
        assert _types(await listed(given.id)) == ["system_message", "user_message"]
        bare = await client.agents.create(
            name="bare", agent_type="memgpt_agent", initial_message_sequence=[]
        )
        assert _types(await listed(bare.id)) == ["system_message"]

        # recompile rewrites message 0 in place; a dry run does not
        await client.agents.blocks.update("human", agent_id=v1.id, value="Ada Lovelace")
        dry = await client.agents.recompile(v1.id, dry_run=True)
        assert "Ada Lovelace" in dry
        [unchanged] = await listed(v1.id)
        assert unchanged.id == system.id and "Ada Lovelace" not in unchanged.content
        # the SDK hands back Letta's JSON-string body as it is (Ddetfix-2)
        prompt = json.loads(await client.agents.recompile(v1.id))
        [rebuilt] = await listed(v1.id)
        assert (rebuilt.id, rebuilt.content) == (system.id, prompt)
        # ... and so does the next step once memory changed
        await client.agents.blocks.update("human", agent_id=v1.id, value="Grace Hopper")
        await client.agents.messages.create(v1.id, input="who am I?")
        history = await listed(v1.id)
        assert history[0].id == system.id and "Grace Hopper" in history[0].content
        assert _types(history) == ["system_message", "user_message", "assistant_message"]
        seen.append(history[0].content)

        # a conversation has its own system message; a fork gets a fresh one
        conversation = await client.conversations.create(agent_id=v1.id)
        await client.conversations.messages.create(conversation.id, input="in a thread")
        thread = [m async for m in client.conversations.messages.list(conversation.id, order="asc")]
        assert thread[0].message_type == "system_message" and thread[0].id != system.id
        fork = await client.conversations.fork(conversation.id)
        forked = [m async for m in client.conversations.messages.list(fork.id, order="asc")]
        assert _types(forked) == _types(thread) and forked[0].id != thread[0].id
        assert [m.message_type for m in forked].count("system_message") == 1

        # reset keeps the system message (recompiled), nothing else
        await client.agents.messages.reset(v1.id)
        assert [m.id for m in await listed(v1.id)] == [system.id]

        # export writes the system message as Letta's .af does; import keeps it
        exported = await client.agents.export_file(memgpt.id)
        [document] = json.loads(exported)["agents"]
        assert document["messages"][0]["role"] == "system"
        assert document["messages"][1]["role"] == "assistant"  # the thought and its call
        assert len(document["messages"][1]["tool_calls"]) == 1
        imported = await client.agents.import_file(file=("m.af", exported.encode()))
        [copy] = imported.agent_ids
        old, new = await listed(memgpt.id), await listed(copy)
        assert _types(new) == _types(old) and new[0].content == old[0].content
        seen += [m.message_type for m in new]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


def test_first_messages_through_letta_client_deterministically() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1,), runs=2, **GUARDS)
