"""Tool rules of every type and tool approvals (human in the loop) through the real
letta-client: the SDK parses the rules Kelpie returns (strict validation), a tool marked with
``agents.tools.update_approval`` stops the run with ``requires_approval``, and the client's
approval message finishes the step. Same seed, same trace hash."""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.llm import LlmRequest, ToolResult
from kelpie_dst.shims.llm import Call, Reply

from .harness import BASE, STRICT, api

GUARDS = {**STRICT, "guard_allow": (*STRICT["guard_allow"], "letta_client", "anyio")}
PAY = '''def pay(n: int) -> str:
    """Pay the bill.

    Args:
        n: how much
    """
    return f"paid {n}"
'''
RULES: list[dict[str, Any]] = [
    {"tool_name": "pay", "type": "run_first", "args": {"n": 5}},
    {"tool_name": "send_message", "type": "exit_loop"},
    {"tool_name": "pay", "type": "continue_loop"},
    {"tool_name": "pay", "type": "max_count_per_step", "max_count_limit": 2},
    {"tool_name": "pay", "type": "constrain_child_tools", "children": ["send_message"]},
    {"tool_name": "pay", "type": "parent_last_tool", "children": ["send_message"]},
    {"tool_name": "pay", "type": "required_before_exit"},
    {
        "tool_name": "pay",
        "type": "conditional",
        "child_output_mapping": {"paid 5": "send_message"},
        "default_child": "send_message",
    },
]


@attrs.define
class PayPolicy:
    """Calls ``pay``; once its result is back, answers with it."""

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        last = request.messages[-1]
        results = [b for b in last.content if isinstance(b, ToolResult)]
        if results:
            return (f"result: {json.loads(results[-1].content)['message']}",)
        return (Call("pay", {"n": 5}),)


async def approval_flow() -> list[str]:
    """Rules of every type round-trip; a call needing approval waits, then runs once."""
    seen: list[str] = []
    async with api(policy=PayPolicy()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        pay = await client.tools.create(source_code=PAY)

        ruled = await client.agents.create(
            name="ruled",
            tool_ids=[pay.id],
            tool_rules=RULES,  # type: ignore[arg-type]
        )
        got = await client.agents.retrieve(ruled.id)
        assert got.tool_rules is not None
        assert [r.type for r in got.tool_rules] == [r["type"] for r in RULES]
        assert got.tool_rules[0].args == {"n": 5}  # type: ignore[union-attr]
        assert got.tool_rules[4].children == ["send_message"]  # type: ignore[union-attr]
        assert got.tool_rules[7].child_output_mapping == {"paid 5": "send_message"}  # type: ignore[union-attr]
        with pytest.raises(letta_client.UnprocessableEntityError, match="child_output_mapping"):
            await client.agents.create(tool_rules=[{"tool_name": "pay", "type": "conditional"}])  # type: ignore[list-item]

        agent = await client.agents.create(name="payer", tool_ids=[pay.id])
        marked = await client.agents.tools.update_approval(
            "pay", agent_id=agent.id, body_requires_approval=True
        )
        assert marked is not None and [(r.tool_name, r.type) for r in marked.tool_rules or ()] == [
            ("pay", "requires_approval")
        ]
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.tools.update_approval(
                "nope", agent_id=agent.id, body_requires_approval=True
            )

        stopped = await client.agents.messages.create(agent.id, input="pay the bill")
        assert stopped.stop_reason.stop_reason == "requires_approval"
        requests = [m for m in stopped.messages if m.message_type == "approval_request_message"]
        assert len(requests) == 1 and requests[0].tool_call.name == "pay"  # type: ignore[union-attr]
        call_id = requests[0].tool_call.tool_call_id  # type: ignore[union-attr]
        with pytest.raises(letta_client.ConflictError, match="waiting for approval"):
            await client.agents.messages.create(agent.id, input="hello?")

        answer = [{"type": "approval", "tool_call_id": call_id, "approve": True}]
        done = await client.agents.messages.create(
            agent.id,
            messages=[{"type": "approval", "approvals": answer}],  # type: ignore[list-item]
        )
        kinds = [m.message_type for m in done.messages]
        assert "tool_return_message" in kinds and done.stop_reason.stop_reason == "end_turn"
        returns = [m for m in done.messages if m.message_type == "tool_return_message"]
        assert "paid 5" in returns[0].tool_return  # type: ignore[union-attr]

        history = [m async for m in client.agents.messages.list(agent.id, order="asc")]
        types = [m.message_type for m in history]
        assert "approval_request_message" in types and "approval_response_message" in types
        response = next(m for m in history if m.message_type == "approval_response_message")
        assert response.approvals is not None and response.approvals[0].approve is True  # type: ignore[union-attr]

        unmarked = await client.agents.tools.update_approval(
            "pay", agent_id=agent.id, body_requires_approval=False
        )
        assert unmarked is not None and not unmarked.tool_rules
        plain = await client.agents.messages.create(agent.id, input="pay again")
        assert plain.stop_reason.stop_reason == "end_turn"
        seen += [f"{m.message_type} {m.id} {m.date}" for m in history]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_rules_and_approvals_through_letta_client() -> None:
    await approval_flow()


def test_rules_and_approvals_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(approval_flow, seeds=(1,), runs=2, **GUARDS)


async def agent_file_flow() -> list[str]:
    """agents.export_file then agents.import_file: a copy with the same blocks, tools, rules
    and history; a bad file is a 400 naming the field (the schema allows any bytes)."""
    async with api(policy=PayPolicy()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        pay = await client.tools.create(source_code=PAY)
        agent = await client.agents.create(
            name="otto",
            memory_blocks=[{"label": "human", "value": "Ada"}],
            tool_ids=[pay.id],
            tool_rules=[{"tool_name": "pay", "type": "max_count_per_step", "max_count_limit": 3}],
        )
        await client.agents.messages.create(agent.id, input="pay it")
        exported = await client.agents.export_file(agent.id)
        document = json.loads(exported)
        assert [x["name"] for x in document["agents"]] == ["otto"]

        imported = await client.agents.import_file(file=("otto.af", exported.encode()))
        [new_id] = imported.agent_ids
        copy = await client.agents.retrieve(new_id)
        assert copy.name == "otto_copy" and new_id != agent.id
        assert [b.value for b in copy.memory.blocks] == ["Ada"]
        assert [t.name for t in copy.tools] == [t.name for t in agent.tools]
        assert [(r.tool_name, r.type) for r in copy.tool_rules or ()] == [
            ("pay", "max_count_per_step")
        ]
        old = [m async for m in client.agents.messages.list(agent.id, order="asc")]
        new = [m async for m in client.agents.messages.list(new_id, order="asc")]
        assert [m.message_type for m in new] == [m.message_type for m in old]

        named = await client.agents.import_file(file=("a.af", exported.encode()), name="second")
        assert (await client.agents.retrieve(named.agent_ids[0])).name == "second"
        with pytest.raises(letta_client.BadRequestError, match="file"):
            await client.agents.import_file(file=("bad.af", b"{not json"))
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.export_file("agent-missing")
        await http.aclose()
    kelpie_dst.log("api.answer", body=exported)
    return [exported]


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_agent_file_export_and_import_through_letta_client() -> None:
    await agent_file_flow()


def test_agent_file_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(agent_file_flow, seeds=(1,), runs=2, **GUARDS)


async def archives_flow() -> list[str]:
    """Archives: create, passages (one and a batch), attach to two agents (both see the
    passages in their archival memory), list by agent, update, delete a passage, detach,
    delete; unknown ids are 404."""
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        shared = await client.archives.create(name="facts", description="shared facts")
        assert shared.name == "facts" and shared.id.startswith("archive-")
        one = await client.archives.passages.create(shared.id, text="otters hold hands")
        many = await client.archives.passages.create_many(
            shared.id, passages=[{"text": "seals sleep"}, {"text": "kelp grows", "tags": ["k"]}]
        )
        assert [p.text for p in many] == ["seals sleep", "kelp grows"]
        ada = await client.agents.create(name="ada")
        bob = await client.agents.create(name="bob")
        for agent in (ada, bob):
            await client.agents.archives.attach(shared.id, agent_id=agent.id)
            texts = {p.text for p in await client.agents.passages.list(agent.id)}
            assert texts == {"otters hold hands", "seals sleep", "kelp grows"}
        mine = [x.id async for x in client.archives.list(agent_id=ada.id)]
        assert mine == [shared.id]
        renamed = await client.archives.update(shared.id, name="facts2")
        assert renamed.name == "facts2"
        assert (await client.archives.retrieve(shared.id)).description == "shared facts"
        cleared = await client.archives.update(shared.id, description="")  # "" clears it
        assert cleared.description == "" and cleared.name == "facts2"
        assert (await client.archives.retrieve(shared.id)).description == cleared.description

        await client.archives.passages.delete(one.id, archive_id=shared.id)
        texts = {p.text for p in await client.agents.passages.list(bob.id)}
        assert texts == {"seals sleep", "kelp grows"}
        await client.agents.archives.detach(shared.id, agent_id=bob.id)
        assert await client.agents.passages.list(bob.id) == []
        await client.archives.delete(shared.id)
        assert await client.agents.passages.list(ada.id) == []
        assert [x.id async for x in client.archives.list()] == []
        with pytest.raises(letta_client.NotFoundError):
            await client.archives.retrieve(shared.id)
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.archives.attach("archive-missing", agent_id=ada.id)
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.archives.create(name="")
        await http.aclose()
    seen = f"{renamed.id} {renamed.name} {renamed.created_at}"
    kelpie_dst.log("api.answer", body=seen)
    return [seen]


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_archives_through_letta_client() -> None:
    await archives_flow()


def test_archives_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(archives_flow, seeds=(1,), runs=2, **GUARDS)
