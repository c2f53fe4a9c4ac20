"""One LLM call of a step: retries with backoff, and token streaming into events.

Retryable failures (timeouts, 429, 5xx, 529, broken connections and cut streams) are retried
``llm_retries`` times, sleeping ``llm_backoff * 2**attempt`` seconds (at most
``llm_backoff_max``) times a jitter in [0.5, 1) drawn from the Rng port, and never less than a
429's ``retry_after``. All sleeps are trio sleeps, so they take virtual time in a simulation.
Each attempt gets fresh message ids: deltas streamed by an attempt that then failed belong to
ids that are never stored, so concatenating the deltas of any stored message id gives exactly
its text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs
import trio

from kelpie_agent.llm import (
    LlmClient,
    LlmError,
    LlmRateLimitedError,
    LlmRequest,
    LlmResponse,
    LlmTimeoutError,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

from ._config import LoopConfig
from ._events import EventSink, SendMessageExtractor
from ._messages import AssistantMessage, ReasoningMessage, ToolCallInfo, ToolCallMessage

__all__ = ["LlmFailure", "LlmOutcome", "call_llm", "streamer_factory"]


@attrs.frozen
class LlmOutcome:
    """A response, and the message id chosen for each content block (by index)."""

    response: LlmResponse
    ids: dict[int, str] = attrs.field(hash=False)
    attempts: int


class LlmFailure(Exception):
    """The call failed for good: not retryable, or out of retries."""

    def __init__(self, error: LlmError, attempts: int) -> None:
        super().__init__(f"{type(error).__name__} after {attempts} attempt(s): {error}")
        self.error = error
        self.attempts = attempts


@attrs.define
class _Streamer:
    """Turns one attempt's chunks into delta events."""

    sink: EventSink
    new_id: Callable[[], str]
    now: Callable[[], float]
    text_kind: Literal["assistant", "reasoning"]
    assistant_tool: str | None  # stream this tool's "message" argument as assistant text
    run_id: str
    step_id: str
    ids: dict[int, str] = attrs.field(factory=dict)
    calls: dict[int, tuple[str, str]] = attrs.field(factory=dict)  # index -> (call id, name)
    extractors: dict[int, SendMessageExtractor] = attrs.field(factory=dict)

    def _id(self, index: int) -> str:
        if index not in self.ids:
            self.ids[index] = self.new_id()
        return self.ids[index]

    async def feed(self, chunk: object) -> None:
        common: dict[str, Any] = {
            "date": self.now(),
            "run_id": self.run_id,
            "step_id": self.step_id,
        }
        if isinstance(chunk, TextDelta):
            if not chunk.text:
                return
            mid = self._id(chunk.index)
            if self.text_kind == "assistant":
                await self.sink.emit(AssistantMessage(id=mid, content=chunk.text, **common))
            else:
                await self.sink.emit(ReasoningMessage(id=mid, reasoning=chunk.text, **common))
        elif isinstance(chunk, ToolCallStart):
            mid = self._id(chunk.index)
            self.calls[chunk.index] = (chunk.id, chunk.name)
            if chunk.name == self.assistant_tool:
                self.extractors[chunk.index] = SendMessageExtractor()
                return
            info = ToolCallInfo(chunk.name, "", chunk.id)
            await self.sink.emit(ToolCallMessage(id=mid, tool_call=info, **common))
        elif isinstance(chunk, ToolCallDelta):
            mid = self._id(chunk.index)
            call_id, _ = self.calls.get(chunk.index, ("", ""))
            extractor = self.extractors.get(chunk.index)
            if extractor is not None:
                text = extractor.feed(chunk.partial_json)
                if text:
                    await self.sink.emit(AssistantMessage(id=mid, content=text, **common))
                return
            if chunk.partial_json:
                info = ToolCallInfo(None, chunk.partial_json, call_id)
                await self.sink.emit(ToolCallMessage(id=mid, tool_call=info, **common))


async def _attempt(
    llm: LlmClient, request: LlmRequest, streamer: _Streamer | None, timeout: float
) -> LlmResponse:
    with trio.move_on_after(timeout):
        if streamer is None:
            return await llm.complete(request)
        async with llm.stream(request) as chunks:
            async for chunk in chunks:
                if not isinstance(chunk, StreamEnd):
                    await streamer.feed(chunk)
            response: LlmResponse = chunks.response
            return response
    raise LlmTimeoutError(f"no answer within {timeout:g}s")


async def call_llm(
    llm: LlmClient,
    request: LlmRequest,
    *,
    config: LoopConfig,
    random: Callable[[], float],
    new_id: Callable[[], str],
    stream: Callable[[], _Streamer] | None = None,
) -> LlmOutcome:
    """Call the LLM with retries; :class:`LlmFailure` when it gives up."""
    attempts = config.llm_retries + 1
    for attempt in range(attempts):
        streamer = stream() if stream is not None else None
        try:
            response = await _attempt(llm, request, streamer, config.llm_timeout)
        except LlmError as error:
            if not error.retryable or attempt + 1 == attempts:
                raise LlmFailure(error, attempt + 1) from error
            delay = min(config.llm_backoff_max, config.llm_backoff * 2**attempt)
            delay *= 0.5 + 0.5 * random()
            if isinstance(error, LlmRateLimitedError) and error.retry_after:
                delay = max(delay, error.retry_after)
            await trio.sleep(delay)
            continue
        ids = dict(streamer.ids) if streamer is not None else {}
        for index in range(len(response.content)):
            if index not in ids:
                ids[index] = new_id()
        return LlmOutcome(response, ids, attempt + 1)
    raise AssertionError("unreachable")


def streamer_factory(
    sink: EventSink,
    *,
    new_id: Callable[[], str],
    now: Callable[[], float],
    text_kind: Literal["assistant", "reasoning"],
    assistant_tool: str | None,
    run_id: str,
    step_id: str,
) -> Callable[[], _Streamer]:
    def make() -> _Streamer:
        return _Streamer(sink, new_id, now, text_kind, assistant_tool, run_id, step_id)

    return make
