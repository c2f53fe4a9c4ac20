"""Server-sent events in Letta's format (docs/http-api.md, "Streaming").

A stream is ``text/event-stream`` made of ``data: <json>\\n\\n`` frames: the messages as the
run produces them, then ``{"message_type": "stop_reason", ...}``, then
``{"message_type": "usage_statistics", ...}``, then ``data: [DONE]``. While nothing happens for
``ping_interval`` seconds (trio time: virtual in a simulation) a ``{"message_type": "ping"}``
frame keeps the connection alive, unless pings were turned off. A failure after the stream
started is an ``event: error`` frame (the SDK raises it during iteration) followed by
``[DONE]``. The response starts with the first event, or after ``ping_interval`` with a ping if
the run is slow to produce one; a failure before that (an unknown agent, a bad field) is an
ordinary JSON error with its status code.

When the client disconnects, the stream stops being written and its channel is closed, so the
agent drops the consumer; the run itself goes on and is stored (the request waits for it).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from kelpie_agent.agent import StreamEvent, letta_json

from ._errors import Observer, classify, error_response
from ._models_common import epoch_datetime

__all__ = ["DONE", "SseResponse", "error_frame", "pinger", "sse_frame"]

Producer = Callable[[trio.MemorySendChannel[StreamEvent]], Awaitable[object]]
DONE = b"data: [DONE]\n\n"
_BUFFER = 256
_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse_frame(data: Mapping[str, Any]) -> bytes:
    """One ``data:`` frame (JSON never contains a raw newline, so one line suffices)."""
    return f"data: {_dumps(data)}\n\n".encode()


def pinger(ports: Any) -> Callable[[], Mapping[str, Any]]:
    """A maker of ping frames (Letta's ``ping`` message) dated and named through ``ports``."""

    def ping() -> dict[str, Any]:
        moment = epoch_datetime(ports.clock.now()).isoformat()
        return {"message_type": "ping", "id": ports.ids.new("ping"), "date": moment}

    return ping


def error_frame(status: int, detail: str) -> bytes:
    body = {"detail": detail, "status_code": status, "message_type": "error_message"}
    return f"event: error\ndata: {_dumps(body)}\n\n".encode()


class SseResponse(Response):
    """An ASGI response streaming the events ``producer`` sends into the channel it is given.

    ``producer(channel)`` runs the turn (the agent closes the channel when the turn ends);
    ``keep(frame)`` filters message frames (``include_return_message_types``); ``ping()``
    makes a ping frame. ``seq_start``: number the message frames (``seq_id``) from
    ``seq_start + 1`` on (a run's stream resumed after ``seq_start``).
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        producer: Producer,
        *,
        keep: Callable[[Mapping[str, Any]], bool] = lambda frame: True,
        ping: Callable[[], Mapping[str, Any]] | None = None,
        ping_interval: float = 15.0,
        observer: Observer | None = None,
        seq_start: int | None = None,
    ) -> None:
        super().__init__(status_code=200, media_type=self.media_type)
        self.seq = seq_start
        self.producer = producer
        self.keep = keep
        self.ping = ping
        self.ping_interval = ping_interval
        self.observer = observer
        self.frames = 0  # data frames written (for tests and logs)
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender, events = trio.open_memory_channel[StreamEvent](_BUFFER)
        done = trio.Event()
        failure: list[BaseException] = []

        async def produce() -> None:
            try:
                async with sender:
                    await self.producer(sender)
            except Exception as exc:
                failure.append(exc)
            finally:
                done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            first: StreamEvent | None = None
            quiet = True  # nothing arrived within a ping interval: start with a ping
            with trio.move_on_after(self.ping_interval):
                try:
                    first = await events.receive()
                except trio.EndOfChannel:
                    await done.wait()
                    if failure:
                        status, detail, retryable = classify(failure[0])
                        self._observe_failure(failure[0], status)
                        await events.aclose()
                        response = error_response(status, detail, retryable=retryable)
                        await response(scope, receive, send)
                        return
                quiet = False
            await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
            with trio.CancelScope() as writing:
                nursery.start_soon(self._watch_disconnect, receive, writing)
                try:
                    await self._write(send, events, first, quiet, done, failure)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                    self.disconnected = True  # the connection is gone
            self.disconnected = self.disconnected or writing.cancelled_caught
            await events.aclose()  # the agent drops the consumer; the run goes on
            await done.wait()
            nursery.cancel_scope.cancel()  # stop watching for a disconnect

    async def _write(
        self,
        send: Send,
        events: trio.MemoryReceiveChannel[StreamEvent],
        first: StreamEvent | None,
        quiet: bool,
        done: trio.Event,
        failure: list[BaseException],
    ) -> None:
        async def frame(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        event = first
        if quiet:
            if self.ping is not None:
                await frame(sse_frame(self.ping()))
            event = await self._next(events, frame)
        while event is not None:
            data = letta_json(event)
            final = data.get("message_type") in ("stop_reason", "usage_statistics")
            if self.seq is not None and not final:
                self.seq += 1
                data["seq_id"] = self.seq
            if final or self.keep(data):
                await frame(sse_frame(data))
                self.frames += 1
            event = await self._next(events, frame)
        await done.wait()
        if failure:
            status, detail, _ = classify(failure[0])
            self._observe_failure(failure[0], status)
            await frame(error_frame(status, detail))
        await send({"type": "http.response.body", "body": DONE, "more_body": False})

    async def _next(
        self,
        events: trio.MemoryReceiveChannel[StreamEvent],
        frame: Callable[[bytes], Awaitable[None]],
    ) -> StreamEvent | None:
        """The next event (``None`` at the end), with a ping every quiet ``ping_interval``."""
        while True:
            with trio.move_on_after(self.ping_interval):
                try:
                    return await events.receive()
                except trio.EndOfChannel:
                    return None
            if self.ping is not None:
                await frame(sse_frame(self.ping()))

    async def _watch_disconnect(self, receive: Receive, writing: trio.CancelScope) -> None:
        while True:
            try:
                message: Message = await receive()
            except Exception:
                message = {"type": "http.disconnect"}
            if message["type"] == "http.disconnect":
                writing.cancel()
                return

    def _observe_failure(self, exc: BaseException, status: int) -> None:
        if self.observer is not None and status >= 500:
            try:
                self.observer("api.stream_error", status=status, error=f"{type(exc).__name__}")
            except Exception:
                pass
