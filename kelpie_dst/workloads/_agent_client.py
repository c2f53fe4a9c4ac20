"""The agent workload's clients: create agents, send their messages (some streamed), retry on
another node with the same ``otid`` until acknowledged, and read back the final state.

Clients run on ``main`` (which no fault crashes) and reach a server node by calling that node's
live :class:`~kelpie_agent.actors.Dispatcher`: a crashed node's dispatcher answers
``ActorStoppedError``, a paused one does not answer at all, so every attempt has a timeout. A
retry carries the same ``otid``, which makes it idempotent (docs/agent.md): the agent answers
a retried send with the run its first attempt started.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from kelpie_agent.actors import ActorError, ActorId, Dispatcher
from kelpie_agent.agent import (
    AgentExistsError,
    AgentMessage,
    AgentStorageError,
    AssistantMessage,
    BlockCreate,
    CreateAgent,
    InputMessage,
    ListBlocks,
    ListMessages,
    ListPassages,
    PassageRecord,
    ReasoningMessage,
    SendMessage,
    StreamEvent,
    ToolCallMessage,
    ToolReturnMessage,
    TurnResult,
    UserMessage,
)
from kelpie_agent.storage import StorageError

from .._errors import NodeDownError
from ..scenario import WorkloadContext
from ._agent_checks import Ack, BlockState, Msg, RequestRecord, StreamRecord
from ._agent_world import World

__all__ = ["AgentPlan", "Clients", "Planned", "RunRecord", "ask", "stream_record", "to_msg"]

PAGE = 500


@attrs.frozen
class Planned:
    index: int
    text: str
    otid: str
    stream: bool


@attrs.frozen
class AgentPlan:
    number: int
    agent_id: str
    agent_type: str
    tool_ids: tuple[str, ...]
    messages: tuple[Planned, ...]


class RunRecord:
    """Everything the invariants look at, filled in by the clients and the final read."""

    def __init__(self, plans: Sequence[AgentPlan]) -> None:
        self.plans = list(plans)
        self.requests: dict[str, RequestRecord] = {}
        self.acks: list[Ack] = []
        self.streams: list[StreamRecord] = []
        self.histories: dict[str, list[Msg]] = {}
        self.blocks: list[BlockState] = []
        self.passages: dict[str, list[str]] = {}
        self.unclosed: list[str] = []  # streamed sends whose stream outlived their turn
        self.stop_reasons: dict[str, int] = {}


def _text(m: AgentMessage) -> str:
    if isinstance(m, ReasoningMessage):
        return m.reasoning
    if isinstance(m, ToolCallMessage):
        return m.tool_call.arguments
    if isinstance(m, ToolReturnMessage):
        return m.tool_return
    return m.content


def to_msg(m: AgentMessage) -> Msg:
    tool = None
    if isinstance(m, ToolCallMessage):
        tool = m.tool_call.name
    elif isinstance(m, ToolReturnMessage):
        tool = m.name
    return Msg(
        id=m.id,
        seq=m.seq,
        run_id=m.run_id,
        type=m.message_type,
        text=_text(m),
        otid=m.otid,
        kind=m.kind if isinstance(m, UserMessage) else "",
        tool=tool,
        status=m.status if isinstance(m, ToolReturnMessage) else None,
    )


def _retryable(error: BaseException) -> bool:
    if isinstance(error, ActorError | StorageError):
        return error.retryable or isinstance(error, StorageError)
    return isinstance(error, AgentStorageError | NodeDownError | trio.TooSlowError)


class Clients:
    def __init__(self, ctx: WorkloadContext, world: World, record: RunRecord) -> None:
        self.ctx = ctx
        self.world = world
        self.record = record
        self.timeout = float(ctx.params["attempt_timeout"])
        self.hop = float(ctx.params["hop"])
        self.max_steps = int(ctx.params["max_steps"])
        self.block_limit = int(ctx.params["block_limit"])
        self.otids = bool(ctx.params["otids"])  # False: a planted bug (retries not idempotent)

    async def client(self, number: int, plans: Sequence[AgentPlan]) -> None:
        """Create this client's agents, then send round-robin: message k of every agent
        before message k + 1 of any."""
        rng = self.ctx.rng(f"client/{number}")
        state = {"node": rng.choice(self.world.node_names)}
        live = []
        for plan in plans:
            if await self._create(plan, rng, state):
                live.append(plan)
        rounds = max((len(p.messages) for p in plans), default=0)
        for k in range(rounds):
            for plan in list(live):
                if not await self._send(plan, plan.messages[k], rng, state):
                    live.remove(plan)

    async def _call(
        self, key: str, agent: str, attempt: Attempt, rng: Any, state: dict[str, str]
    ) -> Any:
        """Send a request until it is answered; a non-retryable error is recorded and raised."""
        record = self.record.requests.setdefault(key, RequestRecord(agent, key))
        actor = ActorId("agent", agent)
        nodes = self.world.node_names
        if len(nodes) > 1 and rng.random() < self.hop:
            state["node"] = rng.choice([n for n in nodes if n != state["node"]])
        while True:
            record = attrs.evolve(record, attempts=record.attempts + 1)
            self.record.requests[key] = record
            self.ctx.count("requests.attempts")
            dispatcher = self.world.dispatchers.get(state["node"])
            try:
                if dispatcher is None:
                    raise NodeDownError(f"node {state['node']} has no dispatcher yet")
                with trio.fail_after(self.timeout):
                    value = await attempt(dispatcher, actor)
            except Exception as error:
                if record.attempts > 1 and isinstance(error, AgentExistsError):
                    value = None  # an earlier attempt created it
                elif not _retryable(error):
                    self.record.requests[key] = attrs.evolve(
                        record, outcome="failed", error=f"{type(error).__name__}: {error}"
                    )
                    raise
                else:
                    self.ctx.count("requests.retries")
                    if isinstance(error, trio.TooSlowError):
                        self.ctx.count("requests.timeouts")
                    if len(nodes) > 1:
                        state["node"] = rng.choice([n for n in nodes if n != state["node"]])
                    backoff = min(5.0, 0.25 * 2 ** min(record.attempts, 6))
                    await trio.sleep(backoff * (0.5 + rng.random() / 2))
                    continue
            self.record.requests[key] = attrs.evolve(
                record, outcome="acked", finished_at=trio.current_time()
            )
            return value

    async def _create(self, plan: AgentPlan, rng: Any, state: dict[str, str]) -> bool:
        request = CreateAgent(
            name=f"agent-{plan.number}",
            agent_type=plan.agent_type,
            memory_blocks=(
                BlockCreate("persona", f"I am agent {plan.number}.", limit=self.block_limit),
                BlockCreate("human", "", limit=self.block_limit),
            ),
            tool_ids=plan.tool_ids,
        )
        try:
            await self._call(f"a{plan.number} create", plan.agent_id, ask(request), rng, state)
        except Exception:
            return False
        self.ctx.count("agents.created")
        return True

    async def _send(
        self, plan: AgentPlan, message: Planned, rng: Any, state: dict[str, str]
    ) -> bool:
        otid = message.otid if self.otids else None
        inputs = (InputMessage("user", message.text, otid=otid),)
        events: list[StreamEvent] = []

        async def attempt(dispatcher: Dispatcher, actor: ActorId) -> TurnResult:
            if not message.stream:
                result = await dispatcher.request(
                    actor, SendMessage(inputs, max_steps=self.max_steps)
                )
                assert isinstance(result, TurnResult), result
                return result
            events.clear()
            send, receive = trio.open_memory_channel[StreamEvent](math.inf)
            request = SendMessage(inputs, max_steps=self.max_steps, stream=send, stream_tokens=True)
            failure: Exception | None = None
            async with receive, trio.open_nursery() as nursery:
                closed = trio.Event()
                nursery.start_soon(_drain, receive, events, closed)
                try:
                    result = await dispatcher.request(actor, request)
                except Exception as error:  # raised outside the nursery, not in a group
                    failure = error
                    nursery.cancel_scope.cancel()  # the actor may never have taken it
                else:
                    with trio.move_on_after(5.0) as waiting:
                        await closed.wait()  # the actor closes the stream when the turn ends
                    if waiting.cancelled_caught:
                        self.record.unclosed.append(f"a{plan.number} #{message.index}")
                        nursery.cancel_scope.cancel()
            if failure is not None:
                raise failure
            assert isinstance(result, TurnResult), result
            return result

        key = f"a{plan.number} #{message.index}"
        try:
            result = await self._call(key, plan.agent_id, attempt, rng, state)
        except Exception:
            return False
        self.record.acks.append(
            Ack(
                plan.agent_id,
                message.index,
                message.otid,
                message.text,
                result.run_id,
                tuple(m.id for m in result.messages),
                result.stop_reason,
            )
        )
        reasons = self.record.stop_reasons
        reasons[result.stop_reason] = reasons.get(result.stop_reason, 0) + 1
        if message.stream:
            record = stream_record(plan.agent_id, message.index, events, result.messages)
            self.record.streams.append(record)
            self.ctx.count("stream.events", len(events))
        return True

    async def read_back(self, plan: AgentPlan, rng: Any) -> None:
        """The agent's whole stored history and its blocks, through the agent itself."""
        state = {"node": rng.choice(self.world.node_names)}
        messages: list[AgentMessage] = []
        while True:
            after = messages[-1].id if messages else None
            page = ListMessages(after=after, limit=PAGE, order="asc", use_assistant_message=False)
            got = await self._call(f"a{plan.number} read", plan.agent_id, ask(page), rng, state)
            messages.extend(got)
            if len(got) < PAGE:
                break
        key = f"a{plan.number} blocks"
        blocks = await self._call(key, plan.agent_id, ask(ListBlocks()), rng, state)
        passages: list[PassageRecord] = []
        while True:
            after = passages[-1].id if passages else None
            query = ListPassages(after=after, limit=PAGE)
            got = await self._call(
                f"a{plan.number} passages", plan.agent_id, ask(query), rng, state
            )
            passages.extend(got)
            if len(got) < PAGE:
                break
        self.record.passages[plan.agent_id] = [p.text for p in passages]
        self.record.histories[plan.agent_id] = [to_msg(m) for m in messages]
        self.record.blocks.extend(
            BlockState(plan.agent_id, b.label, b.value, b.limit) for b in blocks
        )


Attempt = Callable[[Dispatcher, ActorId], Awaitable[Any]]


def ask(message: Any) -> Attempt:
    """An attempt that sends ``message`` as it is."""

    async def attempt(dispatcher: Dispatcher, actor: ActorId) -> Any:
        return await dispatcher.request(actor, message)

    return attempt


async def _drain(
    receive: trio.MemoryReceiveChannel[StreamEvent], out: list[StreamEvent], closed: trio.Event
) -> None:
    async for event in receive:
        out.append(event)
    closed.set()


def stream_record(
    agent: str, index: int, events: Sequence[StreamEvent], result: Sequence[AgentMessage]
) -> StreamRecord:
    """The streamed pieces joined per (id, type), next to the result's messages."""
    pieces: dict[str, str] = {}
    for event in events:
        if isinstance(event, AssistantMessage | ReasoningMessage | ToolCallMessage):
            key = f"{event.id}/{event.message_type}"
            pieces[key] = pieces.get(key, "") + _text(event)
    texts = tuple((f"{m.id}/{m.message_type}", _text(m)) for m in result)
    return StreamRecord(agent, index, tuple(pieces.items()), texts)
