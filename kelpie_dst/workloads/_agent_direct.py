"""The agent workload's direct link: requests go straight to a server node's live
:class:`~kelpie_agent.actors.Dispatcher`, as typed agent requests (no service, no HTTP).

A crashed node's dispatcher answers ``ActorStoppedError``; a restarted node has a new one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from kelpie_agent.actors import ActorError, ActorId
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
    ReasoningMessage,
    SendMessage,
    StreamEvent,
    ToolCallMessage,
    ToolReturnMessage,
    ToolRule,
    TurnResult,
    UserMessage,
)
from kelpie_agent.storage import StorageError

from .._errors import NodeDownError
from ._agent_checks import BlockState, Msg
from ._agent_client import AgentPlan, Planned, Sent, join_pieces
from ._agent_world import World

__all__ = ["DirectLink", "message_text", "to_msg"]


def message_text(m: AgentMessage) -> str:
    """What the checkers compare: content, reasoning, tool call arguments or tool return."""
    if isinstance(m, ReasoningMessage):
        return m.reasoning
    if isinstance(m, ToolCallMessage):
        return m.tool_call.arguments
    if isinstance(m, ToolReturnMessage):
        return m.tool_return
    return m.content


def to_msg(m: AgentMessage) -> Msg:
    tool = call_id = None
    if isinstance(m, ToolCallMessage):  # approval requests too
        tool, call_id = m.tool_call.name, m.tool_call.tool_call_id
    elif isinstance(m, ToolReturnMessage):
        tool, call_id = m.name, m.tool_call_id
    return Msg(
        id=m.id,
        seq=m.seq,
        run_id=m.run_id,
        type=m.message_type,
        text=message_text(m),
        otid=m.otid,
        kind=m.kind if isinstance(m, UserMessage) else "",
        tool=tool,
        status=m.status if isinstance(m, ToolReturnMessage) else None,
        step_id=m.step_id,
        call_id=call_id,
    )


class DirectLink:
    def __init__(self, world: World) -> None:
        self.world = world

    def retryable(self, error: BaseException) -> bool:
        if isinstance(error, ActorError | StorageError):
            return error.retryable or isinstance(error, StorageError)
        return isinstance(error, AgentStorageError | NodeDownError)

    async def _ask(self, node: str, plan: AgentPlan, message: Any) -> Any:
        dispatcher = self.world.dispatchers.get(node)
        if dispatcher is None:
            raise NodeDownError(f"node {node} has no dispatcher yet")
        return await dispatcher.request(ActorId("agent", plan.agent_id), message)

    def server_id(self, plan: AgentPlan) -> str | None:
        return plan.agent_id

    async def create(self, node: str, plan: AgentPlan, block_limit: int, retry: bool) -> None:
        request = CreateAgent(
            name=f"agent-{plan.number}",
            agent_type=plan.agent_type,
            memory_blocks=tuple(
                BlockCreate(b.label, b.value, limit=b.limit, read_only=b.read_only)
                for b in plan.blocks
            ),
            tool_ids=plan.tool_ids,
            tool_rules=tuple(
                ToolRule(name, "max_count_per_step", max_count_limit=limit)
                for name, limit in plan.max_counts
            ),
            timezone=plan.timezone or "UTC",
        )
        try:
            await self._ask(node, plan, request)
        except AgentExistsError:
            if not retry:
                raise  # an earlier attempt may have created it; a first one must not find it

    async def send(
        self, node: str, plan: AgentPlan, message: Planned, otid: str | None, max_steps: int
    ) -> Sent:
        inputs = (InputMessage("user", message.text, otid=otid),)
        if not message.stream:
            result = await self._ask(node, plan, SendMessage(inputs, max_steps=max_steps))
            assert isinstance(result, TurnResult), result
            return _sent(result)
        dispatcher = self.world.dispatchers.get(node)
        if dispatcher is None:
            raise NodeDownError(f"node {node} has no dispatcher yet")
        events: list[StreamEvent] = []
        send, receive = trio.open_memory_channel[StreamEvent](math.inf)
        request = SendMessage(inputs, max_steps=max_steps, stream=send, stream_tokens=True)
        failure: Exception | None = None
        unclosed = False
        async with receive, trio.open_nursery() as nursery:
            closed = trio.Event()
            nursery.start_soon(_drain, receive, events, closed)
            try:
                result = await dispatcher.request(ActorId("agent", plan.agent_id), request)
            except Exception as error:  # raised outside the nursery, not in a group
                failure = error
                nursery.cancel_scope.cancel()  # the actor may never have taken it
            else:
                with trio.move_on_after(5.0) as waiting:
                    await closed.wait()  # the actor closes the stream when the turn ends
                if waiting.cancelled_caught:
                    unclosed = True
                    nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        assert isinstance(result, TurnResult), result
        pieces = [
            (f"{e.id}/{e.message_type}", message_text(e))
            for e in events
            if isinstance(e, AssistantMessage | ReasoningMessage | ToolCallMessage)
        ]
        joined = join_pieces(pieces)
        texts = [text for key, text in joined if key.endswith("/assistant_message")]
        return attrs.evolve(
            _sent(result),
            pieces=joined,
            events=len(events),
            unclosed=unclosed,
            reply=texts[-1] if texts else _sent(result).reply,
        )

    async def history(
        self, node: str, plan: AgentPlan, after: str | None, assistant: bool, limit: int
    ) -> list[Msg]:
        page = ListMessages(after=after, limit=limit, order="asc", use_assistant_message=assistant)
        got: Sequence[AgentMessage] = await self._ask(node, plan, page)
        return [to_msg(m) for m in got]

    async def blocks(self, node: str, plan: AgentPlan) -> list[BlockState]:
        got = await self._ask(node, plan, ListBlocks())
        return [BlockState(plan.agent_id, b.label, b.value, b.limit) for b in got]

    async def passages(
        self, node: str, plan: AgentPlan, after: str | None, limit: int
    ) -> list[Any]:
        return list(await self._ask(node, plan, ListPassages(after=after, limit=limit)))


def _sent(result: TurnResult) -> Sent:
    texts = [m.content for m in result.messages if isinstance(m, AssistantMessage)]
    return Sent(
        result.run_id,
        tuple(m.id for m in result.messages),
        result.stop_reason,
        reply=texts[-1] if texts else None,
        steps=result.usage.step_count,
    )


async def _drain(
    receive: trio.MemoryReceiveChannel[StreamEvent], out: list[StreamEvent], closed: trio.Event
) -> None:
    async for event in receive:
        out.append(event)
    closed.set()
