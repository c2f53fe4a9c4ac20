"""Driving AgentActor in the simulator: a stand-in actor context, environments, checks.

``StandInContext`` provides the members of ``kelpie_agent.actors.ActorContext`` that the agent
uses (its transactions are the KV's own; the real runtime fences them with the lease).
``check_history`` is the structural invariant every test applies to what storage holds.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import (
    BOOT_MESSAGE,
    BOOT_THOUGHT,
    AgentActor,
    AgentEnv,
    AgentMessage,
    AgentView,
    AssistantMessage,
    BlockCreate,
    CreateAgent,
    InputMessage,
    Keys,
    LoopConfig,
    ReasoningMessage,
    SendMessage,
    SessionCheckpoint,
    StreamEvent,
    ToolCallMessage,
    ToolReturnMessage,
    TurnResult,
    UserMessage,
    builtin_id,
    default_tool_names,
    is_prompt,
)
from kelpie_agent.agent._codec import unpack
from kelpie_agent.llm import LlmRequest
from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction
from kelpie_dst.shims import LlmTiming, SimLlmClient, open_kv, open_sandbox, sim_ports
from kelpie_dst.shims.llm import Call, Policy, Reply

STOP_REASONS = {
    "end_turn",
    "error",
    "llm_api_error",
    "invalid_llm_response",
    "invalid_tool_call",
    "max_steps",
    "max_tokens_exceeded",
    "no_tool_call",
    "tool_rule",
    "cancelled",
    "requires_approval",
}


@attrs.frozen
class StandInId:
    kind: str
    id: str


@attrs.define
class StandInContext:
    """What the actor runtime gives an actor (minus lease fencing)."""

    actor_id: StandInId
    kv: KV
    ports: Ports
    node_id: str = "main"

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        return self.kv.transaction()


def make_env(
    policy: Policy,
    *,
    timing: LlmTiming | None = None,
    sandbox: bool = True,
    config: LoopConfig | None = None,
    mcp: Any = None,
) -> AgentEnv:
    llm = SimLlmClient(policy, timing=timing or LlmTiming.instant())
    factory = (lambda r: open_sandbox(name="agent-tools", network=r.network)) if sandbox else None
    return AgentEnv(llm=llm, sandbox_factory=factory, config=config or LoopConfig(), mcp=mcp)


async def activate(env: AgentEnv, kv: KV, agent_id: str, ports: Ports | None = None) -> AgentActor:
    actor = AgentActor(env)
    await actor.activate(StandInContext(StandInId("agent", agent_id), kv, ports or sim_ports()))
    return actor


def base_tools(agent_type: str, *extra: str) -> tuple[str, ...]:
    return tuple(builtin_id(n) for n in (*default_tool_names(agent_type), *extra))


async def create_agent(
    env: AgentEnv,
    kv: KV,
    *,
    agent_type: str = "letta_v1_agent",
    tools: Sequence[str] | None = None,
    blocks: Iterable[BlockCreate] = (
        BlockCreate("persona", "I am a helpful otter."),
        BlockCreate("human", "The user."),
    ),
    **options: Any,
) -> tuple[AgentActor, AgentView]:
    ports = sim_ports()
    agent_id = ports.ids.new("agent")
    actor = await activate(env, kv, agent_id, ports)
    tool_ids = base_tools(agent_type) if tools is None else tuple(tools)
    view = await actor.handle(
        CreateAgent(
            name=f"agent-{agent_id[-6:]}",
            agent_type=agent_type,
            memory_blocks=tuple(blocks),
            tool_ids=tool_ids,
            **options,
        )
    )
    assert isinstance(view, AgentView)
    return actor, view


async def say(actor: AgentActor, text: str, **options: Any) -> TurnResult:
    result = await actor.handle(SendMessage((InputMessage("user", text),), **options))
    assert isinstance(result, TurnResult)
    assert result.stop_reason in STOP_REASONS, result
    return result


async def collect(receive: trio.MemoryReceiveChannel[StreamEvent]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    async with receive:
        async for event in receive:
            events.append(event)
    return events


async def stored_messages(kv: KV, agent_id: str) -> list[AgentMessage]:
    rows = await kv.scan_prefix(Keys(agent_id).messages)
    return [unpack(v) for _, v in rows]


async def stored_session(kv: KV, agent_id: str) -> SessionCheckpoint | None:
    raw = await kv.get(Keys(agent_id).session)
    return unpack(raw) if raw is not None else None


def after_initial(messages: Sequence[AgentMessage], agent_type: str) -> list[AgentMessage]:
    """The messages after a new agent's first ones, which must be exactly Letta's default
    sequence for ``agent_type``: the stored system prompt, then (not for letta_v1_agent) the
    boot ``send_message`` (its thought, call and return) and the login event."""
    assert is_prompt(messages[0]), messages[0]
    if agent_type == "letta_v1_agent":
        return list(messages[1:])
    if isinstance(messages[2], AssistantMessage):  # rendered: send_message's text, no return
        thought, said, login = messages[1:4]
        assert isinstance(said, AssistantMessage) and said.content == BOOT_MESSAGE
        first = messages[:4]
    else:
        thought, call, done, login = first = messages[1:5]
        assert isinstance(call, ToolCallMessage) and call.tool_call.name == "send_message"
        assert json.loads(call.tool_call.arguments) == {"message": BOOT_MESSAGE}
        assert isinstance(done, ToolReturnMessage)
        assert done.tool_call_id == call.tool_call.tool_call_id
        first = messages[:5]
    assert isinstance(thought, ReasoningMessage) and thought.reasoning == BOOT_THOUGHT
    assert isinstance(login, UserMessage) and login.kind == "login"
    assert json.loads(login.content)["type"] == "login"
    assert {m.run_id for m in first} == {None}
    return list(messages[len(first) :])


async def check_history(kv: KV, agent_id: str) -> list[AgentMessage]:
    """Storage holds a well-formed history: seqs strictly increasing, every message indexed by
    id, every tool call answered at most once (and answered unless its run is still
    unfinished), and a finished session has no pending calls."""
    keys = Keys(agent_id)
    messages = await stored_messages(kv, agent_id)
    seqs = [m.seq for m in messages]
    assert seqs == sorted(set(seqs)), seqs
    prompts = [m for m in messages if is_prompt(m)]
    assert prompts and prompts[0] is messages[0], "the history must start with its system message"
    assert len(prompts) == 1, f"{len(prompts)} stored system prompts"
    for m in messages:
        assert unpack(await kv.get(keys.message_id(m.id))) == m.seq
    calls = {m.tool_call.tool_call_id: m for m in messages if isinstance(m, ToolCallMessage)}
    returns = [m.tool_call_id for m in messages if isinstance(m, ToolReturnMessage)]
    assert len(returns) == len(set(returns)), "a tool call answered twice"
    assert set(returns) <= set(calls), "a tool return without its call"
    session = await stored_session(kv, agent_id)
    if session is not None and not session.running and not session.awaiting_approval:
        assert session.pending == ()
        assert session.stop_reason in STOP_REASONS
        mine = {c for c, m in calls.items() if m.run_id == session.session_id}
        if session.transferred_to is None:
            assert mine <= set(returns), "a finished run left a tool call unanswered"
    return messages


def log_result(result: TurnResult) -> None:
    """Put a turn's outcome in the trace, so the trace hash covers what the agent did."""
    kelpie_dst.log(
        "turn",
        stop=result.stop_reason,
        messages=[json.dumps([m.message_type, m.id]) for m in result.messages],
        reply=result.reply,
    )


@attrs.define
class CountingPolicy:
    """Calls ``tool`` with ``n`` = 1..``calls`` (one per step), then answers ``done``.
    (Which call comes next is read from the conversation, so it resumes correctly.)"""

    tool: str
    calls: int
    heartbeat: bool = False
    seen: list[LlmRequest] = attrs.field(factory=list)

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        self.seen.append(request)
        done = sum(
            1 for m in request.messages for b in m.content if getattr(b, "name", None) == self.tool
        )
        if done >= self.calls:
            return ("done",) if not self.heartbeat else (Call("send_message", {"message": "done"}),)
        args: dict[str, Any] = {"n": done + 1}
        if self.heartbeat:
            args["request_heartbeat"] = True
        return (Call(self.tool, args),)


def node_kv(node: kelpie_dst.Node | None = None, host: kelpie_dst.Node | None = None) -> KV:
    sim = kelpie_dst.current_simulation()
    assert sim is not None
    return open_kv(node or sim.current_node(), host=host)  # type: ignore[arg-type]
