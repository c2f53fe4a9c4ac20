"""Sessions: starting a run, resuming an interrupted one, and moving one to another agent.

A run starts by committing its input messages together with a fresh checkpoint, so an
acknowledged message is never lost: if the node dies afterwards, the next activation finds the
checkpoint ``running`` and resumes the run (docs/agent.md, "Checkpoints and recovery").
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from ._calls import finish
from ._checkpoint import SessionCheckpoint
from ._codec import Keys, pack, unpack
from ._errors import InvalidRequestError, SessionError
from ._events import EventSink
from ._loop import Loop, TurnOptions
from ._messages import (
    AgentMessage,
    AssistantMessage,
    LettaStopReason,
    SystemMessage,
    UserMessage,
    render_messages,
)
from ._requests import ImportSession, InputMessage, SendMessage, SessionSnapshot, TurnResult
from ._runtime import AgentRuntime

__all__ = ["export_session", "import_session", "resume", "send"]


def _input(rt: AgentRuntime, message: InputMessage, run_id: str) -> AgentMessage:
    if not isinstance(message, InputMessage):
        raise InvalidRequestError(f"messages must be InputMessage values, got {message!r}")
    if not isinstance(message.content, str) or not message.content.strip():
        raise InvalidRequestError(f"a {message.role} message needs non-empty text content")
    common: dict[str, Any] = {
        "id": rt.new_id("message"),
        "date": rt.now(),
        "seq": rt.alloc_seq(),
        "run_id": run_id,
        "name": message.name,
        "otid": message.otid,
    }
    if message.role == "user":
        return UserMessage(content=message.content, **common)
    if message.role == "system":
        return SystemMessage(content=message.content, **common)
    if message.role == "assistant":
        return AssistantMessage(content=message.content, **common)
    raise InvalidRequestError(
        f"message role must be user, system or assistant, got {message.role!r}"
    )


async def _commit(
    rt: AgentRuntime, messages: list[AgentMessage], cp: SessionCheckpoint, what: str
) -> None:
    await rt.write([*rt.message_writes(messages), (rt.keys.session, pack(cp))], what)
    rt.remember(messages)
    rt.session = cp


async def run_messages(rt: AgentRuntime, cp: SessionCheckpoint) -> list[AgentMessage]:
    """The stored messages of run ``cp`` (read back from storage: a resumed run's early
    messages may predate this activation)."""
    start = rt.keys.message(cp.first_seq)
    end = Keys.prefix_end(rt.keys.messages)
    rows = await rt.read(lambda: rt.ctx.kv.scan(start, end), "the run's messages")
    messages = [unpack(value) for _, value in rows]
    return [m for m in messages if m.run_id == cp.session_id]


async def _finish_turn(
    rt: AgentRuntime, cp: SessionCheckpoint, sink: EventSink, use_assistant_message: bool
) -> TurnResult:
    messages = render_messages(
        await run_messages(rt, cp), use_assistant_message=use_assistant_message
    )
    stop = cp.stop_reason or "error"
    await sink.emit(LettaStopReason(stop))
    await sink.emit(cp.usage)
    return TurnResult(cp.session_id, tuple(messages), stop, cp.usage, cp.error)


async def _close(channel: trio.MemorySendChannel[object] | None) -> None:
    if channel is not None:
        with trio.CancelScope(shield=True):
            await channel.aclose()


async def send(rt: AgentRuntime, request: SendMessage) -> TurnResult:
    """Run the loop on ``request``'s input; the stream is closed when the turn ends."""
    try:
        rt.require()
        if not request.messages:
            raise InvalidRequestError("messages: at least one input message is required")
        max_steps = rt.config.max_steps if request.max_steps is None else request.max_steps
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise InvalidRequestError(f"max_steps must be an integer >= 1, got {max_steps!r}")
        if rt.session is not None and rt.session.running:
            await resume(rt)  # finish the interrupted run before starting a new one
        earlier = await _run_with_otid(rt, request.messages[0].otid)
        if earlier is not None:  # a retried request (same otid): answer with its run
            sink = EventSink(request.stream, rt.config.sink_timeout)
            return await _finish_turn(rt, earlier, sink, request.use_assistant_message)
        run_id = rt.new_id("run")
        inputs = [_input(rt, m, run_id) for m in request.messages]
        now = rt.now()
        paused = rt.paused_until if rt.paused_until is not None and now < rt.paused_until else None
        cp = SessionCheckpoint(
            session_id=run_id,
            agent_id=rt.agent_id,
            max_steps=max_steps,
            first_seq=inputs[0].seq,
            started_at=now,
            updated_at=now,
            paused_until=paused,
        )
        await _commit(rt, inputs, cp, "the input messages")
        await rt.hazard("agent.input_committed")
        sink = EventSink(request.stream, rt.config.sink_timeout)
        options = TurnOptions(request.stream_tokens, request.use_assistant_message, request.cancel)
        cp = await Loop(rt, sink, options).run()
        await rt.hazard("agent.turn_committed")  # between the last commit and the answer
        return await _finish_turn(rt, cp, sink, request.use_assistant_message)
    finally:
        await _close(request.stream)  # type: ignore[arg-type]


async def _run_with_otid(rt: AgentRuntime, otid: str | None) -> SessionCheckpoint | None:
    """The last run, if its first input carried ``otid`` (so the request is a retry). The
    input is read from storage when the run has pushed it out of the in-memory window."""
    cp = rt.session
    if otid is None or cp is None or cp.running:
        return None
    first = next((m for m in rt.history if m.seq == cp.first_seq), None)
    if first is None:
        raw = await rt.get(rt.keys.message(cp.first_seq), "the last run's first input")
        first = unpack(raw) if raw is not None else None
    if first is not None and first.otid == otid and first.run_id == cp.session_id:
        return cp
    return None


async def resume(rt: AgentRuntime) -> TurnResult | None:
    """Finish the interrupted run, if there is one."""
    cp = rt.session
    if cp is None or not cp.running:
        return None
    sink = EventSink(None, rt.config.sink_timeout)
    cp = await Loop(rt, sink, TurnOptions()).run()
    return await _finish_turn(rt, cp, sink, True)


async def export_session(rt: AgentRuntime, target: str) -> SessionSnapshot:
    rt.require()
    Keys(target)  # checks the id
    cp = rt.session
    if cp is None:
        raise SessionError(f"agent {rt.agent_id} has no session to transfer")
    if cp.transferred_to is not None:
        raise SessionError(
            f"session {cp.session_id} was already transferred to {cp.transferred_to}"
        )
    messages = await run_messages(rt, cp)
    closed = finish(rt, cp, "cancelled") if cp.running else cp
    await _commit(rt, [], attrs.evolve(closed, transferred_to=target), "the transferred session")
    return SessionSnapshot(rt.agent_id, cp, tuple(messages))


async def import_session(rt: AgentRuntime, request: ImportSession) -> TurnResult:
    try:
        rt.require()
        snapshot = request.snapshot
        original = snapshot.checkpoint
        sink = EventSink(request.stream, rt.config.sink_timeout)
        if rt.session is not None and rt.session.session_id == original.session_id:
            cp = rt.session  # imported before: finish it if needed, never copy twice
            if cp.running:
                cp = await Loop(rt, sink, TurnOptions()).run()
            return await _finish_turn(rt, cp, sink, True)
        if rt.session is not None and rt.session.running:
            await resume(rt)
        renamed: dict[str, str] = {}
        copies: list[AgentMessage] = []
        for message in snapshot.messages:
            new_id = rt.new_id("message")
            renamed[message.id] = new_id
            copies.append(attrs.evolve(message, id=new_id, seq=rt.alloc_seq()))
        pending = tuple(
            attrs.evolve(call, message_id=renamed.get(call.message_id, call.message_id))
            for call in original.pending
        )
        first = copies[0].seq if copies else rt.next_seq
        cp = attrs.evolve(
            original,
            agent_id=rt.agent_id,
            pending=pending,
            first_seq=first,
            transferred_from=snapshot.source_agent_id,
            transferred_to=None,
            updated_at=rt.now(),
        )
        await _commit(rt, copies, cp, "the imported session")
        if cp.running:
            cp = await Loop(rt, sink, TurnOptions()).run()
        return await _finish_turn(rt, cp, sink, True)
    finally:
        await _close(request.stream)  # type: ignore[arg-type]
