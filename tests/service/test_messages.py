"""Messages through the service (one node, strict guards): send, stream, list with Letta's
cursors, reset, cancel; retries with the same otid run once; and each method's errors."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AssistantMessage,
    CreateAgent,
    InputMessage,
    LettaStopReason,
    LettaUsage,
    ToolReturnMessage,
    UserMessage,
    is_prompt,
)
from kelpie_agent.service import AgentService, InvalidError, NotFoundError, UnavailableError
from kelpie_dst.shims import LlmTiming, open_kv

from ..agent.harness import CountingPolicy, after_initial, check_history, stored_messages
from .harness import otto, service_node, user
from .test_agents import _fails


def _node() -> kelpie_dst.Node:
    sim = kelpie_dst.current_simulation()
    assert sim is not None
    node = sim.current_node()
    assert node is not None
    return node


TICK = "def tick(n: int) -> str:\n    return f'tick {n}'\n"


async def _inputs(svc: AgentService, agent_id: str) -> Counter[str | None]:
    return Counter(
        m.otid
        for m in await stored_messages(svc.kv, agent_id)
        if isinstance(m, UserMessage) and m.kind == "input"
    )


@pytest.mark.dst(seeds=3, guards="strict")
async def test_send_message_returns_the_run_and_the_history_holds_it() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        result = await svc.send_message(agent_id, user("My name is Ada"))
        assert result.stop_reason == "end_turn" and result.usage.step_count >= 2
        assert result.reply == "Nice to meet you, Ada! I'll remember that."
        assert not any(isinstance(m, UserMessage) for m in result.response_messages)
        history = await svc.list_messages(agent_id, order="asc")
        history = after_initial(history, "memgpt_agent")
        assert [m.id for m in history] == [m.id for m in result.messages]
        assert (await svc.get_agent_block(agent_id, "human")).value == "\nName: Ada"
        stored = [m.id for m in await stored_messages(svc.kv, agent_id)]
        assert (await svc.get_agent(agent_id)).message_ids == tuple(stored)
        [system] = [m for m in await check_history(svc.kv, agent_id) if is_prompt(m)]
        assert "Name: Ada" in system.content  # rebuilt at the step after the memory edit


@pytest.mark.dst(seeds=3, guards="strict")
async def test_list_messages_pages_with_letta_cursors_in_both_orders() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(CreateAgent(name="e"))).agent.id
        for i in range(5):
            await svc.send_message(agent_id, user(f"note {i}"))
        everything = await svc.list_messages(agent_id, order="asc", limit=1000)
        assert len(everything) == 11 and is_prompt(everything[0])
        assert everything[1].content == "note 0"  # type: ignore[union-attr]
        ids = [m.id for m in everything]
        for order, expected in (("desc", ids[::-1]), ("asc", ids)):
            seen: list[str] = []
            page = await svc.list_messages(agent_id, order=order, limit=3)
            while page:  # as letta-client pages: after=<last id> until an empty page
                seen += [m.id for m in page]
                page = await svc.list_messages(agent_id, order=order, limit=3, after=seen[-1])
            assert seen == expected
        page = await svc.list_messages(agent_id, before=ids[5], limit=2)
        assert [m.id for m in page] == [ids[7], ids[6]]  # newer than ids[5], nearest first
        page = await svc.list_messages(agent_id, before=ids[5], limit=2, order="asc")
        assert [m.id for m in page] == ids[3:5]
        page = await svc.list_messages(agent_id, after=ids[8], before=ids[2])
        assert [m.id for m in page] == ids[3:8][::-1]
        raw = await svc.list_messages(agent_id, use_assistant_message=False, limit=1)
        assert isinstance(raw[0], AssistantMessage)  # letta_v1 answers in plain text

        await _fails(svc.list_messages("agent-nope"), NotFoundError, 404, "agent-nope")
        await _fails(
            svc.list_messages(agent_id, after="message-nope"),
            NotFoundError,
            404,
            "after: agent",
        )
        await _fails(svc.list_messages(agent_id, before="x y"), InvalidError, 422, "before")
        await _fails(svc.list_messages(agent_id, limit=1001), InvalidError, 422, "limit")
        await _fails(svc.list_messages(agent_id, order="newest"), InvalidError, 422, "order")


@pytest.mark.dst(seeds=2, guards="strict")
async def test_send_message_errors_name_the_field() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        await _fails(svc.send_message("agent-nope", user("hi")), NotFoundError, 404, "agent-nope")
        await _fails(svc.send_message(agent_id, ()), InvalidError, 422, "messages: at least one")
        await _fails(
            svc.send_message(agent_id, user("   ")), InvalidError, 422, "messages[0].content"
        )
        bad_role = (InputMessage("robot", "hi"),)  # type: ignore[arg-type]
        await _fails(svc.send_message(agent_id, bad_role), InvalidError, 422, "messages[0].role")
        await _fails(
            svc.send_message(agent_id, user("hi"), max_steps=0), InvalidError, 422, "max_steps"
        )
        await _fails(svc.send_message(agent_id, "hi"), InvalidError, 422, "messages")  # type: ignore[arg-type]
        assert after_initial(await svc.list_messages(agent_id, order="asc"), "memgpt_agent") == []


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_message_retried_with_its_otid_runs_once_even_after_other_messages() -> None:
    """The agent core's otid records make any later retry (after other messages, after
    deactivation) return the original run, streamed or not, without running it again; a
    replayed stream carries what the live one did (no user-role messages)."""
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        first = await svc.send_message(agent_id, user("note one", otid="otid-1"))
        await svc.send_message(agent_id, user("note two"))
        await trio.sleep(20)  # idle: the actor deactivates; the records are in the KV
        again = await svc.send_message(agent_id, user("note one", otid="otid-1"))
        assert again == first
        async with svc.stream_message(agent_id, user("note one", otid="otid-1")) as stream:
            events = [event async for event in stream]
        assert stream.result == first
        assert events == [*first.response_messages, LettaStopReason("end_turn"), first.usage]
        counts = await _inputs(svc, agent_id)
        assert counts["otid-1"] == 1 and sum(counts.values()) == 2


@pytest.mark.dst(seeds=3, guards="strict", max_time=600)
async def test_a_retry_after_the_node_stopped_mid_run_finishes_that_run_once() -> None:
    """The node serving a 6-step tool loop stops in the middle: the caller gets an
    UnavailableError whose outcome is unknown, retryable because the message carries the
    caller's otid (not retryable without one: a repeat could run twice). A new node on the
    same storage, asked again with the same otid, finishes the interrupted run and answers
    with it: one input, every tool call once."""
    kv = open_kv(_node())
    policy = CountingPolicy("tick", 6)
    timing = LlmTiming(0.5, 1.0, 50.0)
    failure: list[UnavailableError] = []
    node_scope = trio.CancelScope()

    async def first_node(task_status: trio.TaskStatus[AgentService]) -> None:
        with node_scope:
            async with service_node(policy=policy, timing=timing, kv=kv) as svc:
                task_status.started(svc)
                await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        first: AgentService = await nursery.start(first_node)
        tool = await first.create_tool(TICK)
        agents = [
            (await first.create_agent(CreateAgent(name=n, tool_ids=(tool.id,)))).agent.id
            for n in ("a", "b")
        ]
        agent_id = agents[0]

        async def client(agent_id: str, otid: str | None) -> None:
            try:
                await first.send_message(agent_id, user("count", otid=otid))
            except UnavailableError as error:
                failure.append(error)

        nursery.start_soon(client, agents[0], "otid-count")
        nursery.start_soon(client, agents[1], None)
        await trio.sleep(3.0)  # a few ticks in
        node_scope.cancel()
    assert sorted((f.outcome_unknown, f.retryable) for f in failure) == [
        (True, False),
        (True, True),
    ]
    done = [m for m in await stored_messages(kv, agent_id) if isinstance(m, ToolReturnMessage)]
    assert 0 < len(done) < 6  # the run really was interrupted in the middle
    async with service_node(policy=policy, timing=timing, kv=kv) as svc:
        result = await svc.send_message(agent_id, user("count", otid="otid-count"))
        assert result.stop_reason == "end_turn"
        stored = after_initial(await check_history(kv, agent_id), "letta_v1_agent")
        ticks = [m for m in stored if isinstance(m, ToolReturnMessage) and m.name == "tick"]
        assert [re.findall(r"tick (\d+)", m.tool_return) for m in ticks] == [
            [str(n)] for n in range(1, 7)
        ]
        assert (await _inputs(svc, agent_id))["otid-count"] == 1
        assert {m.run_id for m in stored} == {result.run_id}


@pytest.mark.dst(seeds=3, guards="strict")
async def test_streamed_tokens_add_up_to_the_stored_reply_then_stop_and_usage() -> None:
    async with service_node(timing=LlmTiming(0.1, 0.2, 40.0)) as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        async with svc.stream_message(agent_id, user("hello there"), stream_tokens=True) as s:
            events = [event async for event in s]
        result = s.result
        assert result is not None and result.stop_reason == "end_turn"
        assert isinstance(events[-2], LettaStopReason) and isinstance(events[-1], LettaUsage)
        pieces: dict[str, str] = {}
        for event in events[:-2]:
            if isinstance(event, AssistantMessage):
                pieces[event.id] = pieces.get(event.id, "") + event.content
        assert len(pieces) == 1 and next(iter(pieces.values())) == result.reply
        assert sum(isinstance(e, AssistantMessage) for e in events) >= 2  # in pieces

        await _fails(_enter(svc, "agent-nope"), NotFoundError, 404, "agent-nope")
        await _fails(_enter(svc, agent_id, ()), InvalidError, 422, "messages")


async def _enter(svc: AgentService, agent_id: str, messages: object = None) -> None:
    async with svc.stream_message(agent_id, user("x") if messages is None else messages):  # type: ignore[arg-type]
        raise AssertionError("the stream should not open")


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_stream_consumer_that_leaves_or_is_cancelled_never_stops_the_run() -> None:
    async with service_node(timing=LlmTiming(0.2, 0.5, 20.0)) as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        async with svc.stream_message(agent_id, user("note one"), stream_tokens=True) as s:
            async for _ in s:
                break  # leaves after the first piece
        with trio.move_on_after(0.6):
            async with svc.stream_message(agent_id, user("note two"), stream_tokens=True) as s:
                async for _ in s:
                    pass
        await trio.sleep(10)
        history = after_initial(await svc.list_messages(agent_id, order="asc"), "memgpt_agent")
        texts = [m.content for m in history if isinstance(m, AssistantMessage)]
        assert texts == ['I hear you. You said: "note one"', 'I hear you. You said: "note two"']
        await check_history(svc.kv, agent_id)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_reset_messages_clears_the_history_and_keeps_memory() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        await svc.send_message(agent_id, user("My name is Ada"))
        before = after_initial(await svc.list_messages(agent_id, order="asc"), "memgpt_agent")
        view = await svc.reset_messages(agent_id)
        [system] = await svc.list_messages(agent_id)  # Letta keeps it, recompiled
        assert view.message_ids == (system.id,) and view.last_stop_reason is None
        assert is_prompt(system) and system.seq == 1 and "Name: Ada" in system.content
        assert not {m.id for m in before} & {m.id for m in await stored_messages(svc.kv, agent_id)}
        assert (await svc.get_agent_block(agent_id, "human")).value == "\nName: Ada"
        assert (await svc.send_message(agent_id, user("what is my name?"))).reply == (
            "Your name is Ada."
        )
        await _fails(svc.reset_messages("agent-nope"), NotFoundError, 404, "agent-nope")


@pytest.mark.dst(seeds=2, guards="strict")
async def test_cancel_runs_stops_a_long_tool_loop_between_steps() -> None:
    async with service_node(policy=CountingPolicy("tick", 40), timing=LlmTiming(0.5, 1, 50)) as svc:
        tool = await svc.create_tool(TICK)
        agent_id = (await svc.create_agent(CreateAgent(name="t", tool_ids=(tool.id,)))).agent.id
        assert svc.cancel_runs(agent_id) == 0
        results = []
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await svc.send_message(agent_id, user("count")))

            nursery.start_soon(run)
            await trio.sleep(4)
            assert svc.cancel_runs(agent_id) == 1
        assert results[0].stop_reason == "cancelled" and results[0].usage.step_count < 40
        assert svc.cancel_runs(agent_id) == 0


@pytest.mark.dst(seeds=2, guards="strict")
async def test_system_and_assistant_inputs_are_stored_but_not_answered() -> None:
    """Letta's other input roles: each is stored once under its own message type, and, like
    the user's input, is not part of the answer (LettaResponse.messages holds what the run
    made), streamed or not, and not in a retried request's replayed answer."""
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        inputs = (
            InputMessage("system", "the tide turns at noon", otid="sys-1"),
            InputMessage("assistant", "I will watch the tide", otid="asst-1"),
            InputMessage("user", "when does the tide turn?", otid="user-1"),
        )
        result = await svc.send_message(agent_id, inputs)
        assert result.stop_reason == "end_turn"
        assert not {m.otid for m in result.response_messages} & {"sys-1", "asst-1", "user-1"}
        stored = await stored_messages(svc.kv, agent_id)
        by_otid = {m.otid: m for m in stored if m.otid in ("sys-1", "asst-1")}
        assert by_otid["sys-1"].message_type == "system_message"
        assert by_otid["asst-1"].message_type == "assistant_message"
        async with svc.stream_message(agent_id, inputs) as stream:  # a retry: the replay
            events = [event async for event in stream]
        assert stream.result == result
        assert not any(getattr(e, "otid", None) in ("sys-1", "asst-1") for e in events)
