"""Sessions: starting a run, resuming an interrupted one, and moving one to another agent.

A run starts by committing its input messages together with a fresh checkpoint, so an
acknowledged message is never lost: if the node dies afterwards, the next activation finds the
checkpoint ``running`` and resumes the run (docs/agent.md, "Checkpoints and recovery").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from kelpie_agent.storage import Transaction

from ._approvals import refuse_while_waiting, start_approval_run
from ._calls import finish
from ._checkpoint import SessionCheckpoint
from ._codec import Keys, pack, unpack
from ._conversations import touch_writes
from ._errors import InvalidRequestError, SessionError, StaleSessionError
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
from ._runs import OtidRecord, RunRecord, run_record
from ._runtime import AgentRuntime

__all__ = ["export_session", "find_retried_run", "import_session", "resume", "run_messages", "send"]

_BATCH = 200


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
    if message.role == "approval":
        raise InvalidRequestError("messages: only the first message may be an approval")
    raise InvalidRequestError(
        f"message role must be user, system or assistant, got {message.role!r}"
    )


async def _commit(
    rt: AgentRuntime,
    messages: list[AgentMessage],
    cp: SessionCheckpoint,
    what: str,
    extra: Sequence[tuple[bytes, bytes | None]] = (),
) -> None:
    await rt.write([*rt.message_writes(messages), *rt.checkpoint_writes(cp), *extra], what)
    rt.remember(messages)
    rt.session = cp


async def run_messages(rt: AgentRuntime, run_id: str, first_seq: int) -> list[AgentMessage]:
    """The stored messages of run ``run_id``, from its first input at ``first_seq`` (read
    back from storage: a resumed run's early messages may predate this activation). Runs of
    a history never interleave, so the run ends at the first message of another."""
    start, end = rt.tkeys.message(first_seq), Keys.prefix_end(rt.tkeys.messages)
    found: list[AgentMessage] = []
    while True:
        rows = await rt.reader.scan(start, end, "the run's messages", limit=_BATCH)
        for _, value in rows:
            message: AgentMessage = unpack(value)
            if message.run_id != run_id:
                return found
            found.append(message)
        if len(rows) < _BATCH:
            return found
        start = rows[-1][0] + b"\x00"


async def _finish_turn(
    rt: AgentRuntime,
    run: RunRecord,
    sink: EventSink,
    use_assistant_message: bool,
    *,
    replay: bool = False,
) -> TurnResult:
    """The run's result; the stream ends with its stop reason and usage. A ``replay`` (the
    answer to a retried request) streams the run's messages first, as the run did."""
    messages = render_messages(
        await run_messages(rt, run.id, run.first_seq), use_assistant_message=use_assistant_message
    )
    stop = run.stop_reason or "error"
    result = TurnResult(run.id, tuple(messages), stop, run.usage, run.error)
    if replay:
        for message in result.response_messages:
            await sink.emit(message)
    await sink.emit(LettaStopReason(stop))
    await sink.emit(run.usage)
    return result


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
        earlier = await find_retried_run(rt, request.messages[0].otid)
        if earlier is not None:  # a retried request (same otid): answer with its run
            _started(rt, request, earlier.id)
            sink = EventSink(request.stream, rt.config.sink_timeout)
            uam = request.use_assistant_message
            return await _finish_turn(rt, earlier, sink, uam, replay=True)
        first, *rest = request.messages
        if first.role == "approval":
            if any(m.role == "approval" for m in rest):
                raise InvalidRequestError("messages: only the first message may be an approval")
            new = lambda m, run: _input(rt, m, run)  # noqa: E731
            started = await start_approval_run(rt, first, rest, max_steps, new)
            run_id = started.session_id
        else:
            refuse_while_waiting(rt)
            run_id = await _start(rt, request, max_steps)
        _started(rt, request, run_id)
        await rt.hazard("agent.input_committed")
        sink = EventSink(request.stream, rt.config.sink_timeout)
        options = TurnOptions(request.stream_tokens, request.use_assistant_message, request.cancel)
        cp = await Loop(rt, sink, options).run()
        await rt.hazard("agent.turn_committed")  # between the last commit and the answer
        return await _finish_turn(rt, run_record(cp), sink, request.use_assistant_message)
    finally:
        await _close(request.stream)  # type: ignore[arg-type]


async def _start(rt: AgentRuntime, request: SendMessage, max_steps: int) -> str:
    """Commit the input messages with the new run's checkpoint, its run index entry, the
    request's otid record and the request's extra writes (a schedule's advance)."""
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
        background=request.background,
        request=request.config,
        thread_id=rt.conversation_id,
    )
    records: list[tuple[bytes, bytes | None]] = [(rt.keys.run_index(now, run_id), b"")]
    records += touch_writes(rt, now)
    otid = request.messages[0].otid
    if otid is not None:
        records.append((rt.tkeys.otid(otid), pack(OtidRecord(otid, run_id, inputs[0].seq))))
    await _commit(rt, inputs, cp, "the input messages", [*records, *request.extra_writes])
    return run_id


def _started(rt: AgentRuntime, request: SendMessage, run_id: str) -> None:
    rt.env.cancels.bind(run_id, request.cancel)  # whoever drives the run hears its cancel
    if request.on_start is not None:
        request.on_start(run_id)


async def find_retried_run(rt: AgentRuntime, otid: str | None) -> RunRecord | None:
    """The finished run an earlier request with this ``otid`` started (so this one is a
    retry), or None.

    A finished run is final, so any activation may answer with it. An unfinished one is
    different: ``send`` resumes the agent's interrupted run before it looks, so an
    unfinished run here means that this activation is behind storage. Most likely another
    node has taken the agent over without this one noticing yet (a pause or a clock jump)
    and is running that very run. Answering with it would give the client a half-done turn
    (agent_chaos seed 300929, Dlead19-1). So the run is read again in a transaction fenced
    by the lease (docs/actors.md, "Fenced reads"): on a deposed activation the fence raises
    ``LeaseLostError``, and the service retries the request on the owner. If the fence holds
    and the run is still unfinished, the activation is marked stale and
    :class:`StaleSessionError` lets the service retry on a fresh load."""
    if otid is None:
        return None
    run = await _retried_run(rt.get, rt, otid)
    if run is None or run.stop_reason is not None:
        return run

    async def fenced(txn: Transaction) -> RunRecord | None:
        return await _retried_run(lambda key, _: txn.get(key), rt, otid)

    run = await rt.commit(fenced, "the retried request's run")
    if run is not None and run.stop_reason is None:
        rt.stale = True
        raise StaleSessionError(
            f"agent {rt.agent_id}: run {run.id} of a retried request is unfinished, and is "
            "not this activation's session; the agent is loaded again"
        )
    return run


async def _retried_run(
    get: Callable[[bytes, str], Awaitable[bytes | None]], rt: AgentRuntime, otid: str
) -> RunRecord | None:
    data = await get(rt.tkeys.otid(otid), "the request's otid")
    if data is None:
        return None
    seen: OtidRecord = unpack(data)
    if seen.otid != otid:  # a digest collision: a new request
        return None
    raw = await get(Keys.run(seen.run_id), "the run record")
    # the otid and run records commit together; only a reset removes both
    return unpack(raw) if raw is not None else None


async def resume(rt: AgentRuntime) -> TurnResult | None:
    """Finish the interrupted run, if there is one."""
    cp = rt.session
    if cp is None or not cp.running:
        return None
    sink = EventSink(None, rt.config.sink_timeout)
    # the cancel of the request that started the run, if one is still retrying it (Dlead21-4)
    with rt.env.cancels.of_run(cp.session_id, rt.agent_id, cp.thread_id) as cancel:
        cp = await Loop(rt, sink, TurnOptions(cancel=cancel)).run()
    return await _finish_turn(rt, run_record(cp), sink, True)


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
    messages = await run_messages(rt, cp.session_id, cp.first_seq)
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
            return await _finish_turn(rt, run_record(cp), sink, True)
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
        return await _finish_turn(rt, run_record(cp), sink, True)
    finally:
        await _close(request.stream)  # type: ignore[arg-type]
