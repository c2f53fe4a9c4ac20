"""letta-client's ``conversations`` (create, list, retrieve, update, delete, fork, cancel,
recompile, messages create/list/stream/compact) against the app with strict response
validation: each conversation is its own thread (history, prompt, context window) on one
agent, sharing its memory; the same seed twice gives the same trace."""

from __future__ import annotations

import random

import httpx
import letta_client
import pytest
import trio
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.agent import LoopConfig
from kelpie_agent.llm import LlmRequest
from kelpie_dst.shims import LlmTiming, ScriptedPolicy
from kelpie_dst.shims.llm import Call

from .harness import BASE, api
from .test_letta_client import GUARDS

letta_client._base_client.get_platform()
ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})
MISSING = "conv-00000000-0000-4000-8000-000000000000"


class Recording:
    """ECHO, keeping every step request it answers (the prompts)."""

    def __init__(self) -> None:
        self.requests: list[LlmRequest] = []

    def respond(self, request: LlmRequest, rng: random.Random) -> tuple[str | Call, ...]:
        self.requests.append(request)
        return ECHO.respond(request, rng)


def _prompt(request: LlmRequest) -> str:
    return "\n".join(m.text for m in request.messages)


def _inputs(messages: list[letta_client.types.agents.Message]) -> list[str]:
    return [str(m.content) for m in messages if m.message_type == "user_message"]


async def _send(client: AsyncLetta, conversation_id: str, text: str) -> list[str]:
    """Send ``text`` on a conversation and read the whole stream: the message types, in order."""
    stream = await client.conversations.messages.create(conversation_id, input=text)
    return [event.message_type async for event in stream]


async def scenario() -> list[str]:
    seen: list[str] = []
    policy = Recording()
    async with api(policy=policy, timing=LlmTiming(), config=LoopConfig(history_window=40)) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )
        agent = await client.agents.create(name="otto", agent_type="letta_v1_agent")
        other = await client.agents.create(name="anna", agent_type="letta_v1_agent")
        one = await client.conversations.create(agent_id=agent.id, summary="about kelp")
        # virtual time stands still between requests: created in the same instant, two records
        # are ordered by id (as Letta orders ties), so let a second pass to order them by date
        await trio.sleep(1)
        two = await client.conversations.create(agent_id=agent.id, description="second")
        hidden = await client.conversations.create(agent_id=agent.id, hidden=True)
        theirs = await client.conversations.create(agent_id=other.id, summary="kelp too")
        assert (one.agent_id, one.summary, one.archived) == (agent.id, "about kelp", False)
        got = await client.conversations.retrieve(one.id)
        assert got.id == one.id and got.created_at == one.created_at

        # list: per agent or all, newest first by default, hidden left out, Letta's cursor
        mine = await client.conversations.list(agent_id=agent.id)
        assert [c.id for c in mine] == [two.id, one.id]
        assert [c.id for c in await client.conversations.list(agent_id=agent.id, order="asc")] == [
            one.id,
            two.id,
        ]
        assert {c.id for c in await client.conversations.list()} == {one.id, two.id, theirs.id}
        assert hidden.id not in {c.id for c in await client.conversations.list(limit=10)}
        page = await client.conversations.list(agent_id=agent.id, after=two.id)
        assert [c.id for c in page] == [one.id]  # after = older than, in desc order
        page = await client.conversations.list(agent_id=agent.id, after=one.id, order="asc")
        assert [c.id for c in page] == [two.id]
        found = await client.conversations.list(summary_search="kelp")
        assert {c.id for c in found} == {one.id, theirs.id}

        # messages: streamed by default, or as JSON; each thread has its own history.
        # letta-client 1.12.1 always reads this route as a stream (it passes stream=True), so
        # the JSON answer (streaming=false) is read with plain HTTP
        alpha = await _send(client, one.id, "alpha")
        assert alpha == ["assistant_message", "stop_reason", "usage_statistics"], alpha
        seen += alpha
        answer = await http.post(
            f"/v1/conversations/{one.id}/messages", json={"input": "beta", "streaming": False}
        )
        assert answer.status_code == 200, answer.text
        assert [m["message_type"] for m in answer.json()["messages"]] == ["assistant_message"]
        await _send(client, two.id, "gamma")
        await client.agents.messages.create(agent.id, input="delta")
        ones = [m async for m in client.conversations.messages.list(one.id, order="asc")]
        assert _inputs(ones) == ["alpha", "beta"]
        twos = [m async for m in client.conversations.messages.list(two.id, order="asc")]
        assert _inputs(twos) == ["gamma"]
        own = [m async for m in client.agents.messages.list(agent.id, order="asc")]
        assert "alpha" not in _inputs(own) and "gamma" not in _inputs(own)
        assert "delta" in _inputs(own)
        # each prompt holds its own thread's messages only
        by_input = {_prompt(r).rsplit("\n", 1)[-1]: _prompt(r) for r in policy.requests}
        assert "alpha" in by_input["beta"] and "gamma" not in by_input["beta"]
        assert "alpha" not in by_input["gamma"] and "alpha" not in by_input["delta"]
        # cursors in both orders
        newest = [m async for m in client.conversations.messages.list(one.id, limit=1)]
        assert newest[0].id == ones[-1].id
        older = [
            m
            async for m in client.conversations.messages.list(
                one.id, before=ones[-1].id, order="asc"
            )
        ]
        assert [m.id for m in older] == [m.id for m in ones[:-1]]
        # as in Letta, `before` is before the cursor in the listed order: newer, when descending
        newer = [m async for m in client.conversations.messages.list(one.id, before=ones[0].id)]
        assert [m.id for m in newer] == [m.id for m in ones[1:]][::-1]
        later = [
            m
            async for m in client.conversations.messages.list(one.id, after=ones[0].id, order="asc")
        ]
        assert [m.id for m in later] == [m.id for m in ones[1:]]
        # default + agent_id is the agent's own history
        default = [
            m
            async for m in client.conversations.messages.list(
                "default", agent_id=agent.id, order="asc"
            )
        ]
        assert [m.id for m in default] == [m.id for m in own]
        everywhere = await client.messages.list(conversation_id=one.id)
        assert {m.id for m in everywhere} == {m.id for m in ones}
        runs = [r async for r in client.runs.list(conversation_id=one.id)]
        assert len(runs) == 2 and all(r.conversation_id == one.id for r in runs)
        assert (await client.conversations.retrieve(one.id)).last_message_at is not None

        # stream: follow the conversation's latest run from storage
        frames = [e async for e in await client.conversations.messages.stream(one.id)]
        assert frames and frames[0].message_type == "user_message"  # type: ignore[union-attr]

        # fork: a copy of the history; later messages stay in their thread
        fork = await client.conversations.fork(one.id)
        forked = [m async for m in client.conversations.messages.list(fork.id, order="asc")]
        assert _inputs(forked) == ["alpha", "beta"]
        assert not {m.id for m in forked} & {m.id for m in ones}
        await _send(client, fork.id, "epsilon")
        ones = [m async for m in client.conversations.messages.list(one.id, order="asc")]
        assert _inputs(ones) == ["alpha", "beta"]
        alpha_id = next(m.id for m in ones if m.message_type == "user_message")
        part = await client.conversations.fork(one.id, message_id=alpha_id)
        kept = [m async for m in client.conversations.messages.list(part.id, order="asc")]
        assert _inputs(kept) == ["alpha"]
        whole = await client.conversations.fork("default", agent_id=agent.id)
        copied = [m async for m in client.conversations.messages.list(whole.id, order="asc")]
        assert _inputs(copied) == _inputs(own)

        # update, compact, recompile, cancel
        done = await client.conversations.update(one.id, archived=True, summary="kelp, done")
        assert done.archived and done.archived_at is not None and done.summary == "kelp, done"
        archived = await client.conversations.list(agent_id=agent.id, archive_status="archived")
        assert [c.id for c in archived] == [one.id]
        compacted = await client.conversations.messages.compact(
            one.id, compaction_settings={"mode": "all"}
        )
        assert compacted.num_messages_after < compacted.num_messages_before
        assert _inputs([m async for m in client.conversations.messages.list(one.id, order="asc")])[
            :2
        ] == ["alpha", "beta"]  # still stored
        prompt = await client.conversations.recompile(two.id)
        assert "otto" in prompt or "<memory_blocks>" in prompt
        assert await client.conversations.cancel(two.id) == {"cancelled": 0}
        seen.append(prompt[:40])

        # delete: the conversation and its history are gone; other threads stay
        await client.conversations.delete(two.id)
        with pytest.raises(letta_client.NotFoundError):
            await client.conversations.retrieve(two.id)
        with pytest.raises(letta_client.NotFoundError):
            await _send(client, two.id, "late")
        assert _inputs([m async for m in client.agents.messages.list(agent.id)])

        # refused, naming the field; unknown ids are 404s
        with pytest.raises(letta_client.UnprocessableEntityError) as caught:
            await client.conversations.create(agent_id=agent.id, model="openai/gpt-4o")
        assert "model" in str(caught.value)
        with pytest.raises(letta_client.UnprocessableEntityError) as caught:
            await client.conversations.list(order_by="nonsense")  # type: ignore[arg-type]
        assert "order_by" in str(caught.value)
        for call in (
            client.conversations.retrieve(MISSING),
            client.conversations.fork(MISSING),
            client.conversations.create(agent_id="agent-00000000-0000-4000-8000-000000000000"),
            client.conversations.list(agent_id=agent.id, after=MISSING),
        ):
            with pytest.raises(letta_client.NotFoundError):
                await call
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.conversations.fork("default")
        seen += [c.id for c in await client.conversations.list(archive_status="all")]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


def test_conversations_through_letta_client_deterministically() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1,), runs=2, **GUARDS)
