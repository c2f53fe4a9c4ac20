"""ServiceAgentActor: the ``agent`` actor a service node runs.

It is the agent core's :class:`AgentActor`, with two additions that need the actor's
single-writer position:

* its transactions keep the service's records in step (``_records.RecordingContext``): the
  agent index, the otid of every input message, the outcome of every run;
* **exactly-once messages.** A ``SendMessage`` whose first input carries an ``otid`` that
  already started a run on this agent is a retry of a request whose outcome its caller did not
  learn (a lost lease, a crashed node, a dropped connection). It is not run again: the actor
  finishes that run if it was interrupted and answers with its result (streamed, too). The
  agent core alone recognises only a retry of the *last* run; the otid record covers retries
  that arrive after other requests.

``DeleteAgent`` also deletes the agent's otid and run records.
"""

from __future__ import annotations

import trio

from kelpie_agent.agent import (
    AgentActor,
    AgentEnv,
    AgentMessage,
    DeleteAgent,
    Keys,
    LettaStopReason,
    LettaUsage,
    ResumeRun,
    SendMessage,
    TurnResult,
    render_messages,
)
from kelpie_agent.agent._codec import unpack as unpack_agent_record
from kelpie_agent.agent._config import ActorContextLike
from kelpie_agent.agent._events import EventSink
from kelpie_agent.storage import Transaction

from ._records import OTIDS, RUNS, OtidRecord, RecordingContext, RunRecord, decode, otid_key
from ._records import run_key as _run_key

__all__ = ["ServiceAgentActor"]

_BATCH = 200


class ServiceAgentActor:
    """An :class:`AgentActor` that keeps the service's records and answers retries once."""

    def __init__(self, env: AgentEnv) -> None:
        self.inner = AgentActor(env)
        self.env = env
        self._ctx: RecordingContext | None = None

    @property
    def ctx(self) -> RecordingContext:
        if self._ctx is None:
            raise RuntimeError("the ServiceAgentActor was not activated")
        return self._ctx

    async def activate(self, ctx: ActorContextLike) -> None:
        self._ctx = RecordingContext(ctx)
        await self.inner.activate(self._ctx)

    async def handle(self, message: object) -> object:
        if isinstance(message, SendMessage) and message.messages and message.messages[0].otid:
            replayed = await self._replay(message)
            if replayed is not None:
                return replayed
        if isinstance(message, DeleteAgent):
            try:
                return await self.inner.handle(message)
            finally:
                await self._forget()
        return await self.inner.handle(message)

    async def deactivate(self) -> None:
        await self.inner.deactivate()

    # -- exactly-once messages -----------------------------------------------------------------
    async def _replay(self, request: SendMessage) -> TurnResult | None:
        rt = self.inner.rt
        await rt.ensure_fresh()
        agent = rt.require()
        otid = request.messages[0].otid
        assert otid is not None
        data = await rt.get(otid_key(agent.id, otid), "the request's otid")
        if data is None:
            return None
        seen: OtidRecord = decode(OtidRecord, data)
        if seen.otid != otid:  # a digest collision: treat as new
            return None
        run = await self._run(seen.run_id)
        if run is None or run.running:
            await self.inner.handle(ResumeRun())  # it was interrupted: finish it first
            run = await self._run(seen.run_id)
        try:
            messages = await self._run_messages(seen)
            rendered = tuple(
                render_messages(messages, use_assistant_message=request.use_assistant_message)
            )
            if run is None:  # not possible: the otid and run records commit together
                result = TurnResult(seen.run_id, rendered, "error", LettaUsage(), "run not found")
            else:
                stop = run.stop_reason or "error"
                result = TurnResult(seen.run_id, rendered, stop, run.usage, run.error)
            sink = EventSink(request.stream, self.env.config.sink_timeout)
            for event in rendered:
                await sink.emit(event)
            await sink.emit(LettaStopReason(result.stop_reason))
            await sink.emit(result.usage)
            return result
        finally:
            if request.stream is not None:
                with trio.CancelScope(shield=True):
                    await request.stream.aclose()

    async def _run(self, run_id: str) -> RunRecord | None:
        rt = self.inner.rt
        data = await rt.get(_run_key(rt.agent_id, run_id), "the run record")
        return decode(RunRecord, data) if data is not None else None

    async def _run_messages(self, seen: OtidRecord) -> list[AgentMessage]:
        """The run's messages: runs are sequential, so they follow its input contiguously."""
        rt = self.inner.rt
        keys = rt.keys
        start, end = keys.message(seen.seq), Keys.prefix_end(keys.messages)
        found: list[AgentMessage] = []
        while True:
            rows = await rt.read(
                lambda s=start: rt.ctx.kv.scan(s, end, limit=_BATCH),  # type: ignore[misc]
                "the run's messages",
            )
            for _, value in rows:
                message: AgentMessage = unpack_agent_record(value)
                if message.run_id != seen.run_id:
                    return found
                found.append(message)
            if len(rows) < _BATCH:
                return found
            start = rows[-1][0] + b"\x00"

    # -- deletion ------------------------------------------------------------------------------
    async def _forget(self) -> None:
        """Delete the otid and run records of a deleted agent (also after a retried delete)."""
        rt = self.inner.rt
        if rt.agent is not None:
            return  # the delete did not happen
        for base in (OTIDS, RUNS):
            prefix = base + f"{rt.agent_id}/".encode()
            while True:
                rows = await rt.read(
                    lambda p=prefix: rt.ctx.kv.scan_prefix(p, limit=_BATCH),  # type: ignore[misc]
                    "the agent's records",
                )
                if not rows:
                    break
                keys = [key for key, _ in rows]

                async def build(txn: Transaction, keys: list[bytes] = keys) -> None:
                    for key in keys:
                        await txn.delete(key)

                await rt.commit(build, "the agent's records")
