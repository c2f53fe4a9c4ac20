"""Streaming: pushing events to a consumer that may be slow, gone or cancelled.

Events are Letta's stream frames (:data:`StreamEvent`): messages, then a ``stop_reason`` and a
``usage_statistics`` frame. With token streaming, the LLM's output arrives as several messages
with the *same* id, each carrying the next piece of text (or of the tool call's JSON
arguments); concatenating them gives the stored message. A consumer that goes away never
breaks the run: the sink is dropped and the run goes on and persists.
"""

from __future__ import annotations

import json

import trio

from ._messages import StreamEvent

__all__ = ["EventSink", "SendMessageExtractor"]


class EventSink:
    """Sends events to an optional trio channel; tolerates a closed or stuck consumer."""

    def __init__(self, channel: trio.MemorySendChannel[StreamEvent] | None, timeout: float) -> None:
        self.channel = channel
        self.timeout = timeout
        self.sent = 0
        self.dropped: str | None = None  # why the consumer was dropped

    @property
    def active(self) -> bool:
        return self.channel is not None

    async def emit(self, event: StreamEvent) -> None:
        channel = self.channel
        if channel is None:
            return
        try:
            with trio.move_on_after(self.timeout) as scope:
                await channel.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
            self._drop(f"consumer gone ({type(error).__name__})")
            return
        if scope.cancelled_caught:
            self._drop(f"consumer did not read for {self.timeout:g}s")
            return
        self.sent += 1

    def _drop(self, reason: str) -> None:
        self.channel = None
        self.dropped = reason


class SendMessageExtractor:
    """Streams the ``message`` argument of a ``send_message`` call out of its partial JSON.

    ``feed(partial_json)`` returns the new characters of the message's string value (decoded),
    so a memgpt agent's reply streams as assistant text, token by token.
    """

    _KEY = '"message"'

    def __init__(self) -> None:
        self._buffer = ""
        self._start: int | None = None  # index just after the opening quote of the value
        self._pos = 0  # how far the value has been decoded
        self._done = False

    def feed(self, partial: str) -> str:
        self._buffer += partial
        if self._done:
            return ""
        if self._start is None:
            at = self._buffer.find(self._KEY)
            if at == -1:
                return ""
            rest = self._buffer[at + len(self._KEY) :]
            stripped = rest.lstrip()
            if not stripped.startswith(":"):
                return ""
            after = stripped[1:].lstrip()
            if not after.startswith('"'):
                return ""
            self._start = len(self._buffer) - len(after) + 1
            self._pos = self._start
        return self._decode()

    def _decode(self) -> str:
        out: list[str] = []
        buf = self._buffer
        i = self._pos
        while i < len(buf):
            ch = buf[i]
            if ch == '"':
                self._done = True
                i += 1
                break
            if ch == "\\":
                if i + 1 >= len(buf):
                    break
                if buf[i + 1] == "u":
                    if i + 6 > len(buf):
                        break
                    code = buf[i : i + 6]
                    if 0xD800 <= int(code[2:], 16) <= 0xDBFF:  # a surrogate pair: need both
                        if i + 12 > len(buf):
                            break
                        code = buf[i : i + 12]
                    out.append(json.loads(f'"{code}"'))
                    i += len(code)
                    continue
                out.append(json.loads(f'"{buf[i : i + 2]}"'))
                i += 2
                continue
            out.append(ch)
            i += 1
        self._pos = i
        return "".join(out)
