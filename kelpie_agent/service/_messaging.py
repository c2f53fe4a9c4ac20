"""Messages: send (whole result or streamed), list, reset, cancel.

Every send carries an ``otid`` on its first message (the caller's, or a new one), and the
``agent`` actor answers a repeated otid with the run it already started
(``_actor.ServiceAgentActor``). So the service retries a send whose outcome was lost with a
lease or a node, and the message is still run exactly once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

import attrs
import trio

from kelpie_agent.actors import ActorId
from kelpie_agent.agent import (
    AgentMessage,
    AgentView,
    CompactionResult,
    CompactMessages,
    InputMessage,
    Keys,
    ListMessages,
    Recompile,
    ResetMessages,
    RunRecord,
    SendMessage,
    StreamEvent,
    TurnResult,
    cancel_keys,
)

from . import _validate as v
from ._base import KIND
from ._errors import InvalidError, NotFoundError, UnavailableError, translate
from ._index import window
from ._steps import Steps

__all__ = ["MessageStream", "Messaging"]


class MessageStream:
    """The events of one message, as the agent produces them (``async for event in stream``):
    messages (token pieces with ``stream_tokens``), then ``LettaStopReason`` and
    ``LettaUsage``. The iteration raises the request's :class:`ServiceError` if it failed;
    ``result`` is the :class:`TurnResult` once the stream is exhausted."""

    def __init__(self, receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        self._receive = receive
        self.result: TurnResult | None = None
        self.error: BaseException | None = None

    def __aiter__(self) -> MessageStream:
        return self

    async def __anext__(self) -> StreamEvent:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            if self.error is not None:
                raise self.error from None
            raise StopAsyncIteration from None


async def _forward(
    receive: trio.MemoryReceiveChannel[StreamEvent],
    out: trio.MemorySendChannel[StreamEvent],
    sent: list[int],
) -> None:
    async with receive:  # closing it drops us from the agent's stream
        async for event in receive:
            try:
                await out.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the consumer left; the run goes on
            sent[0] += 1


class Messaging(Steps):
    """Sending and reading an agent's messages."""

    async def _send_request(
        self,
        agent_id: str,
        messages: Sequence[InputMessage],
        max_steps: int | None,
        use_assistant_message: bool,
        stream_tokens: bool,
        **extra: Any,
    ) -> tuple[SendMessage, bool]:
        """The checked request, and whether the caller can repeat it safely (it gave an
        otid; the service's own retries reuse the one it adds)."""
        await self._agent(agent_id)
        inputs = v.input_messages(messages)
        if max_steps is not None:
            v.int_at_least(max_steps, "max_steps", 1)
        for name, flag in (
            ("use_assistant_message", use_assistant_message),
            ("stream_tokens", stream_tokens),
        ):
            if not isinstance(flag, bool):
                raise InvalidError(name, f"must be true or false, got {flag!r}")
        request = SendMessage(
            v.with_otid(inputs, self.ports.ids.new("otid")),
            max_steps=max_steps,
            stream_tokens=stream_tokens,
            use_assistant_message=use_assistant_message,
            cancel=trio.Event(),
            config={"use_assistant_message": use_assistant_message},
            **extra,
        )
        return request, inputs[0].otid is not None

    async def send_message(
        self,
        agent_id: str,
        messages: Sequence[InputMessage],
        *,
        max_steps: int | None = None,
        use_assistant_message: bool = True,
        conversation_id: str | None = None,
    ) -> TurnResult:
        """Run the agent on new input and return the finished run (Letta's LettaResponse:
        ``result.response_messages``, ``stop_reason``, ``usage``). Give the first message an
        ``otid`` to make retries of the same request safe across calls."""
        request, idempotent = await self._send_request(
            agent_id, messages, max_steps, use_assistant_message, False, thread=conversation_id
        )
        with self._registered(agent_id, request):
            result: TurnResult = await self._request(agent_id, request, idempotent=idempotent)
        await self.ports.hazards.point("service.reply")  # the run is durable; the reply is not out
        return result

    @asynccontextmanager
    async def stream_message(
        self,
        agent_id: str,
        messages: Sequence[InputMessage],
        *,
        max_steps: int | None = None,
        stream_tokens: bool = False,
        use_assistant_message: bool = True,
        conversation_id: str | None = None,
    ) -> AsyncIterator[MessageStream]:
        """``async with service.stream_message(...) as stream: async for event in stream``.

        Bad arguments and an unknown agent raise on entry. Leaving the block early (or being
        cancelled), even before the first event, never withdraws the message: the request
        goes on in the background of this node (its events are dropped), the agent commits
        the input and finishes the run; the history shows it. Only this node stopping can
        stop it before the agent took it (a retry with the same otid is then safe)."""
        request, idempotent = await self._send_request(
            agent_id,
            messages,
            max_steps,
            use_assistant_message,
            stream_tokens,
            thread=conversation_id,
        )
        send, receive = trio.open_memory_channel[StreamEvent](self.options.stream_buffer)
        stream = MessageStream(receive)

        async def produce() -> None:
            try:  # the channel closes after result/error is set: the consumer then sees them
                stream.result = await self._stream_into(agent_id, request, send, idempotent)
            except Exception as error:  # the consumer's iteration raises it
                stream.error = translate(error) or error
            except BaseException:  # cancelled: this node is stopping
                stream.error = UnavailableError(
                    f"agent {agent_id}: node {self.node_id} stopped while serving the stream; "
                    "its outcome is unknown",
                    outcome_unknown=True,
                    retryable=idempotent,
                )
                raise
            finally:
                send.close()

        self._spawn(f"a stream to agent {agent_id}", produce)
        try:
            yield stream
        finally:
            receive.close()  # the producer drops the consumer; the run goes on

    async def stream_to(
        self,
        agent_id: str,
        messages: Sequence[InputMessage],
        out: trio.MemorySendChannel[StreamEvent],
        *,
        max_steps: int | None = None,
        stream_tokens: bool = False,
        use_assistant_message: bool = True,
        conversation_id: str | None = None,
    ) -> TurnResult:
        """Like :meth:`stream_message`, sending the events into ``out`` (closed at the end)
        and returning the result, for a caller that owns the consuming task (an SSE
        response). A failure before the first event is retried like ``send_message``; after
        it, an :class:`UnavailableError` (retryable with the caller's otid: the retry answers
        with the run's result)."""
        async with out:
            request, idempotent = await self._send_request(
                agent_id,
                messages,
                max_steps,
                use_assistant_message,
                stream_tokens,
                thread=conversation_id,
            )
            return await self._stream_into(agent_id, request, out, idempotent)

    async def _stream_into(
        self,
        agent_id: str,
        request: SendMessage,
        out: trio.MemorySendChannel[StreamEvent],
        idempotent: bool,
    ) -> TurnResult:
        sent = [0]

        async def attempt(message: SendMessage) -> TurnResult:
            inner_send, inner_receive = trio.open_memory_channel[StreamEvent](0)
            failure: Exception | None = None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_forward, inner_receive, out, sent)
                try:
                    result: TurnResult = await self.dispatcher.request(
                        ActorId(KIND, agent_id), attrs.evolve(message, stream=inner_send)
                    )
                except Exception as error:  # raised outside the nursery, not in a group
                    failure = error
                finally:
                    inner_send.close()
            if failure is not None:
                raise failure
            return result

        with self._registered(agent_id, request):
            result: TurnResult = await self._request(
                agent_id,
                request,
                attempt=attempt,
                retry_unknown=lambda: sent[0] == 0,
                idempotent=idempotent,
            )
        return result

    async def start_run(
        self,
        agent_id: str,
        messages: Sequence[InputMessage],
        *,
        max_steps: int | None = None,
        use_assistant_message: bool = True,
        config: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
    ) -> RunRecord:
        """Start a run in the background (Letta's background mode and ``/messages/async``)
        and return its record as soon as the agent committed the input (``running``, or
        already finished). The run outlives the request; it is retried like any send while
        this node runs, and resumed by the agent's next activation if the node dies. Follow
        it with :meth:`get_run` and :meth:`follow_run`."""
        request, idempotent = await self._send_request(
            agent_id,
            messages,
            max_steps,
            use_assistant_message,
            False,
            background=True,
            thread=conversation_id,
        )
        if config:
            request = attrs.evolve(request, config={**request.config, **config})
        started: list[str] = []
        known = trio.Event()
        failure: list[Exception] = []

        def on_start(run_id: str) -> None:
            if not started:
                started.append(run_id)
            known.set()

        request = attrs.evolve(request, on_start=on_start)

        async def run() -> None:
            try:
                with self._registered(agent_id, request):
                    await self._request(agent_id, request, idempotent=idempotent)
            except Exception as error:
                failure.append(translate(error) or error)
                raise
            finally:
                known.set()

        self._spawn(f"a background run of agent {agent_id}", run)
        await known.wait()
        if not started:
            raise failure[0] if failure else UnavailableError(f"agent {agent_id}: no run started")
        return await self.get_run(started[0])

    def _registered(self, agent_id: str, request: SendMessage) -> AbstractContextManager[None]:
        return self.cancels.registered(cancel_keys(agent_id, request.thread), request.cancel)

    def cancel_runs(self, agent_id: str) -> int:
        """Ask the runs this node is serving for the agent (or, given a conversation's id,
        for that conversation) to stop after their current step (stop reason
        ``cancelled``); returns how many were asked. A run this node resumed after a lost
        lease or a crash is reached too (``kelpie_agent.agent._cancels``); runs started
        through other nodes are not."""
        return self.cancels.cancel(agent_id)

    async def list_messages(
        self,
        agent_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        order: str = "desc",
        use_assistant_message: bool = True,
        conversation_id: str | None = None,
    ) -> list[AgentMessage]:
        """A page of the agent's history (or of its conversation ``conversation_id``),
        newest first by default. ``after``/``before`` are message ids relative to the
        listing order (Letta's cursors)."""
        await self._agent(agent_id)
        limit, descending = v.page_limit(limit), v.order(order)
        keys = Keys(conversation_id or agent_id)
        for field, cursor in (("after", after), ("before", before)):
            if cursor is not None:
                v.ident(cursor, field)
                if await self.read.get(keys.message_id(cursor), "a message cursor") is None:
                    raise NotFoundError(
                        "message",
                        cursor,
                        f"{field}: {conversation_id or agent_id} has no message {cursor!r}",
                    )
        win = window(descending, after, before)
        request = ListMessages(
            after=win.low,
            before=win.high,
            limit=limit,
            order="desc" if win.from_high else "asc",
            use_assistant_message=use_assistant_message,
            thread=conversation_id,
        )
        page: list[AgentMessage] = await self._request(agent_id, request)
        return page[::-1] if win.reverse else page

    async def compact_messages(self, agent_id: str, request: CompactMessages) -> CompactionResult:
        """Summarize the oldest messages in the agent's context now (Letta's summarize)."""
        await self._agent(agent_id)
        result: CompactionResult = await self._request(agent_id, request)
        return result

    async def reset_messages(self, agent_id: str) -> AgentView:
        """Delete the agent's history and session (memory and archival stay)."""
        await self._agent(agent_id)
        view: AgentView = await self._request(agent_id, ResetMessages())
        return view

    async def recompile(
        self, agent_id: str, conversation_id: str | None = None, *, dry_run: bool = False
    ) -> str:
        """The system prompt the agent's next step sends, compiled from its current memory
        (Letta's ``agents.recompile``); unless ``dry_run`` it replaces the thread's stored
        system message in place."""
        await self._agent(agent_id)
        request = Recompile(thread=conversation_id, dry_run=dry_run)
        prompt: str = await self._request(agent_id, request)
        return prompt
