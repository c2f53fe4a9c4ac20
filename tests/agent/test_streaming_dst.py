"""Streaming in the simulator: token deltas, latency and network delay, consumers that leave."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentEnv,
    AssistantMessage,
    LettaStopReason,
    LettaUsage,
    ListMessages,
    ReasoningMessage,
    StreamEvent,
    ToolCallMessage,
    ToolReturnMessage,
    render_messages,
)
from kelpie_agent.llm import AnthropicLlm
from kelpie_dst.shims import LlmTiming, ScriptedPolicy
from kelpie_dst.shims.llm import start_anthropic_host

from .harness import (
    after_initial,
    check_history,
    collect,
    create_agent,
    make_env,
    node_kv,
    say,
    stored_messages,
)

TRICKY = 'He said "hi" \\ then\nleft 🦦 — naïve café, {braces} and \t tabs'
_T = TRICKY.replace("{", "{{").replace("}", "}}")  # as a rule template
SCRIPT: dict[str, Any] = {
    "mode": "scripted",
    "rules": [
        {"when": {"tool": "send_message"}, "text": "(done)"},
        {
            "when": {"tool": "archival_memory_search"},
            "text": "Found it.",
            "tool_calls": [{"name": "send_message", "input": {"message": _T}}],
        },
        {
            "text": "Let me think about that for a moment, carefully and at length.",
            "tool_calls": [
                {
                    "name": "archival_memory_search",
                    "input": {"query": 'kelp "forests"', "request_heartbeat": True},
                }
            ],
        },
    ],
}
V1_SCRIPT: dict[str, Any] = {"mode": "scripted", "rules": [{"text": _T + " " + "word " * 40}]}


def _deltas(events: list[StreamEvent]) -> dict[str, str]:
    """Text per message id, concatenating every delta event."""
    out: dict[str, str] = {}
    for event in events:
        if isinstance(event, AssistantMessage):
            out[event.id] = out.get(event.id, "") + event.content
        elif isinstance(event, ReasoningMessage):
            out[event.id] = out.get(event.id, "") + event.reasoning
        elif isinstance(event, ToolCallMessage):
            out[event.id] = out.get(event.id, "") + event.tool_call.arguments
    return out


def _text(message: object) -> str | None:
    if isinstance(message, AssistantMessage):
        return message.content
    if isinstance(message, ReasoningMessage):
        return message.reasoning
    if isinstance(message, ToolCallMessage):
        return message.tool_call.arguments
    return None


async def _streamed_turn(
    sim: kelpie_dst.Simulation, env: AgentEnv, agent_type: str, use_assistant_message: bool
) -> None:
    cuts = sim.faults.fired["llm.stream_cut"]
    kv = node_kv()
    actor, view = await create_agent(env, kv, agent_type=agent_type)
    send, receive = trio.open_memory_channel[StreamEvent](1000)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect_into, receive, events := [])
        result = await say(
            actor,
            "tell me",
            stream=send,
            stream_tokens=True,
            use_assistant_message=use_assistant_message,
        )
    assert isinstance(events[-2], LettaStopReason) and events[-2].stop_reason == result.stop_reason
    assert isinstance(events[-1], LettaUsage) and events[-1] == result.usage
    stored = render_messages(
        after_initial(await stored_messages(kv, view.agent.id), agent_type),
        use_assistant_message=use_assistant_message,
    )
    deltas = _deltas(events)
    streamed_ids = 0
    for message in stored:
        text = _text(message)
        if text is None:
            continue
        assert deltas.get(message.id) == text, (message, deltas.get(message.id))
        streamed_ids += 1
    assert streamed_ids >= 1 or result.stop_reason == "llm_api_error"
    # every delta belongs to a stored message, or to an attempt that was cut and retried
    if sim.faults.fired["llm.stream_cut"] == cuts:
        assert set(deltas) <= {m.id for m in stored}
    # four cuts in a row (each 30%) use up the retries: a clean llm_api_error, not a failure
    assert result.stop_reason == "end_turn" or "LlmStreamCutError" in (result.error or "")
    if agent_type == "memgpt_agent" and use_assistant_message and result.stop_reason == "end_turn":
        assert result.reply == TRICKY
    await check_history(kv, view.agent.id)


async def collect_into(
    receive: trio.MemoryReceiveChannel[StreamEvent], out: list[StreamEvent]
) -> None:
    out.extend(await collect(receive))


@pytest.mark.dst(seeds=5, guards="strict", faults=["llm.stream_cut=0.3"])
async def test_token_deltas_concatenate_to_the_stored_text(dst: kelpie_dst.Simulation) -> None:
    """With stream_tokens, the deltas of each stored message id concatenate to exactly its
    text: assistant text (letta_v1), reasoning and send_message's text (memgpt), and tool
    call arguments (use_assistant_message off), even when streams are cut and retried."""
    timing = LlmTiming(0.1, 0.3, 50.0)
    v1 = make_env(ScriptedPolicy.from_dict(V1_SCRIPT), timing=timing)
    await _streamed_turn(dst, v1, "letta_v1_agent", True)
    env = make_env(ScriptedPolicy.from_dict(SCRIPT), timing=timing)
    await _streamed_turn(dst, env, "memgpt_agent", True)
    await _streamed_turn(dst, env, "memgpt_agent", False)


@pytest.mark.dst(
    seeds=5,
    guards="strict",
    guard_allow=["anthropic", "httpx2", "httpcore2", "anyio"],
    faults=["network.delay=0.3"],
)
async def test_streaming_under_network_delay_through_the_real_sdk(
    dst: kelpie_dst.Simulation,
) -> None:
    """Through the real anthropic SDK against the simulated API host, with latency spikes on
    the network: events arrive spread over virtual time (true streaming, not one burst at the
    end), deltas concatenate to the stored text, and the stream ends stop_reason, usage."""
    host = await start_anthropic_host(dst, ScriptedPolicy.from_dict(V1_SCRIPT), timing=LlmTiming())
    client = anthropic.DefaultAsyncHttpxClient(verify=_SSL)
    async with AnthropicLlm(base_url=host.base_url, api_key="sim", http_client=client) as llm:
        env = AgentEnv(llm=llm, sandbox_factory=None)
        kv = node_kv()
        actor, view = await create_agent(env, kv, model="anthropic/claude-sim-1")
        send, receive = trio.open_memory_channel[StreamEvent](1000)
        stamped: list[tuple[float, StreamEvent]] = []

        async def consume() -> None:
            async with receive:
                async for event in receive:
                    stamped.append((trio.current_time(), event))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            result = await say(actor, "hello", stream=send, stream_tokens=True)
    events = [e for _, e in stamped]
    deltas = [t for t, e in stamped if isinstance(e, AssistantMessage)]
    assert len(deltas) > 10 and deltas[-1] - deltas[0] > 0.2  # spread over time
    assert [type(e) for e in events[-2:]] == [LettaStopReason, LettaUsage]
    [reply] = [
        m for m in await stored_messages(kv, view.agent.id) if isinstance(m, AssistantMessage)
    ]
    assert _deltas(events)[reply.id] == reply.content == result.reply


_SSL = __import__("ssl").create_default_context()


@pytest.mark.dst(seeds=5, guards="strict")
async def test_a_consumer_that_leaves_mid_stream_never_breaks_the_run(
    dst: kelpie_dst.Simulation,
) -> None:
    """A consumer that closes its end, is cancelled, or stops reading mid-stream: the run
    still finishes, everything is stored, and the agent keeps working."""
    kv = node_kv()
    env = make_env(ScriptedPolicy.from_dict(SCRIPT), timing=LlmTiming(0.1, 0.2, 100.0))
    actor, view = await create_agent(env, kv, agent_type="memgpt_agent")
    rng = dst.rng("test/leave")
    for how in ("close", "cancel", "stall"):
        send, receive = trio.open_memory_channel[StreamEvent](0)
        after = rng.randint(0, 12)

        async def consumer(
            receive: trio.MemoryReceiveChannel[StreamEvent] = receive,
            how: str = how,
            after: int = after,
        ) -> None:
            if how == "stall":
                await trio.sleep_forever()  # never reads: the sink times out and drops it
            with trio.move_on_after(1e9) as scope:
                async with receive:
                    seen = 0
                    async for _ in receive:
                        seen += 1
                        if seen > after:
                            if how == "cancel":
                                scope.cancel()
                            break

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            result = await say(actor, f"tell me ({how})", stream=send, stream_tokens=True)
            nursery.cancel_scope.cancel()
        assert result.stop_reason == "end_turn"
        assert result.reply == TRICKY
        kelpie_dst.log("left", how=how, after=after)
    history = await actor.handle(ListMessages(limit=1000, order="asc"))
    history = after_initial(history, "memgpt_agent")
    assert sum(isinstance(m, AssistantMessage) for m in history) == 3
    stored = after_initial(await check_history(kv, view.agent.id), "memgpt_agent")
    returns = [m for m in stored if isinstance(m, ToolReturnMessage)]
    assert len(returns) == 6  # search + send_message, per turn
