"""``AnthropicLlm``: the LLM port on the official ``anthropic`` SDK (Messages API with tools).

Streaming is true token streaming: ``messages.create(stream=True)`` yields the API's raw
server-sent events, which become port chunks as they arrive. The SDK's own retries (429, 5xx,
connection errors and timeouts, honouring ``retry-after``) happen before anything is returned;
what is left is mapped to the port's errors.

The SDK does I/O through httpx2 on anyio, so inside a kelpie_dst simulation it talks over the
simulated network, and its retry sleeps take virtual time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import anthropic
import httpx2
import trio
from anthropic.types import (
    MessageParam,
    RawMessageStreamEvent,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)

from ._errors import (
    LlmBadRequestError,
    LlmConnectionError,
    LlmError,
    LlmOverloadedError,
    LlmRateLimitedError,
    LlmServerError,
    LlmStreamCutError,
    LlmTimeoutError,
)
from ._port import ChunkStream
from ._types import (
    AssistantBlock,
    LlmRequest,
    LlmResponse,
    Message,
    StreamChunk,
    StreamEnd,
    TextBlock,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
)

__all__ = ["AnthropicLlm", "map_error"]

DEFAULT_TIMEOUT = 600.0  # seconds; the SDK's own default


class AnthropicLlm:
    """The LLM port on Anthropic's Messages API.

    ``api_key`` and ``base_url`` default to the SDK's (``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``). ``max_retries`` is the SDK's
    own retry count; ``timeout`` is seconds per attempt. ``http_client`` must be an
    ``httpx2.AsyncClient`` (the SDK's HTTP library), if given.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            http_client=http_client,
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def __aenter__(self) -> AnthropicLlm:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def complete(self, request: LlmRequest) -> LlmResponse:
        try:
            message = await self.client.messages.create(
                model=request.model,
                max_tokens=request.max_tokens,
                messages=[_message_param(m) for m in request.messages],
                system=request.system or anthropic.omit,
                tools=[_tool_param(t) for t in request.tools] or anthropic.omit,
            )
        except anthropic.AnthropicError as error:
            raise map_error(error) from error
        content: list[AssistantBlock] = []
        for block in message.content:
            if block.type == "text":
                content.append(TextBlock(block.text))
            elif block.type == "tool_use":
                content.append(ToolCall(block.id, block.name, _arguments(block.input)))
        if not message.stop_reason:
            raise LlmServerError(f"answer {message.id} has no stop reason")
        usage = Usage(message.usage.input_tokens, message.usage.output_tokens)
        return LlmResponse(message.id, message.model, content, message.stop_reason, usage)

    def stream(self, request: LlmRequest) -> ChunkStream:
        return ChunkStream(self._stream(request))

    async def _stream(self, request: LlmRequest) -> AsyncGenerator[StreamChunk, None]:
        try:
            events = await self.client.messages.create(
                model=request.model,
                max_tokens=request.max_tokens,
                messages=[_message_param(m) for m in request.messages],
                system=request.system or anthropic.omit,
                tools=[_tool_param(t) for t in request.tools] or anthropic.omit,
                stream=True,
            )
        except anthropic.AnthropicError as error:
            raise map_error(error) from error
        reader = _EventReader()
        try:
            while True:  # to the end of the body, so the connection can be reused
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                chunk = reader.read(event)
                if chunk is not None:
                    yield chunk
        except anthropic.AnthropicError as error:
            if not reader.ended:  # after message_stop the answer is whole: only draining failed
                raise map_error(error, midstream=True) from error
        except httpx2.TimeoutException as error:
            if not reader.ended:
                raise LlmTimeoutError(f"stream timed out after {reader.events} events") from error
        except (httpx2.TransportError, httpx2.StreamError) as error:
            if not reader.ended:
                raise LlmStreamCutError(
                    f"stream cut off after {reader.events} events: {type(error).__name__}: {error}"
                ) from error
        finally:
            await _finish(events)
        if not reader.ended:
            raise LlmStreamCutError(
                f"stream ended after {reader.events} events without message_stop"
            )


async def _finish(events: anthropic.AsyncStream[RawMessageStreamEvent]) -> None:
    """Close the SDK's stream and run its generators to their end: iterating a closed
    response fails at once, and trio warns about async generators left suspended."""
    with trio.CancelScope(shield=True):
        await events.close()
        with contextlib.suppress(Exception):
            while True:
                await events.__anext__()


class _EventReader:
    """Turns the API's raw stream events into port chunks, checking their order."""

    def __init__(self) -> None:
        self.events = 0
        self.ended = False
        self.id = ""
        self.model = ""
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop_reason = ""
        self.kinds: dict[int, str] = {}
        # The API's block index -> the block's position in the port's response. They differ
        # when the API sends blocks the port leaves out (thinking, an empty text block): a
        # chunk's index must be its block's position, which the loop keys message ids by.
        self.positions: dict[int, int] = {}

    def _at(self, index: int) -> int:
        if index not in self.positions:
            self.positions[index] = len(self.positions)
        return self.positions[index]

    def read(self, event: RawMessageStreamEvent) -> StreamChunk | None:
        self.events += 1
        if self.ended:
            raise LlmServerError(f"stream event {event.type!r} after message_stop")
        if event.type == "message_start":
            self.id, self.model = event.message.id, event.message.model
            self.input_tokens = event.message.usage.input_tokens
            return None
        if not self.id:
            raise LlmServerError(f"stream event {event.type!r} before message_start")
        if event.type == "content_block_start":
            block = event.content_block
            self.kinds[event.index] = block.type
            if block.type == "tool_use":
                return ToolCallStart(self._at(event.index), block.id, block.name)
            if block.type == "text" and block.text:
                return TextDelta(self._at(event.index), block.text)
            return None
        if event.type == "content_block_delta":
            delta, kind = event.delta, self.kinds.get(event.index)
            if delta.type == "text_delta" and kind == "text":
                return TextDelta(self._at(event.index), delta.text)
            if delta.type == "input_json_delta" and kind == "tool_use":
                if not delta.partial_json:
                    return None
                return ToolCallDelta(self._at(event.index), delta.partial_json)
            if delta.type in ("text_delta", "input_json_delta"):
                raise LlmServerError(f"{delta.type} for block {event.index} of kind {kind!r}")
            return None  # thinking, signatures, citations: not part of the port
        if event.type == "message_delta":
            self.stop_reason = str(event.delta.stop_reason or "")
            self.output_tokens = event.usage.output_tokens
            if event.usage.input_tokens is not None:
                self.input_tokens = event.usage.input_tokens
            return None
        if event.type == "message_stop":
            self.ended = True
            if not self.stop_reason:
                raise LlmServerError("message_stop without a stop reason")
            usage = Usage(self.input_tokens, self.output_tokens)
            return StreamEnd(self.id, self.model, self.stop_reason, usage)
        return None  # content_block_stop


def map_error(error: anthropic.AnthropicError, *, midstream: bool = False) -> LlmError:
    """The port's error for an SDK exception."""
    message = f"{type(error).__name__}: {error}"
    if isinstance(error, anthropic.APITimeoutError):
        return LlmTimeoutError(message)
    if isinstance(error, anthropic.APIConnectionError):
        if midstream:
            return LlmStreamCutError(message)
        return LlmConnectionError(message)
    if isinstance(error, anthropic.APIStatusError):
        status = error.status_code
        kind = _error_type(error.body)
        if kind == "rate_limit_error" or status == 429:
            return LlmRateLimitedError(
                message, status=status, retry_after=_retry_after(error.response.headers)
            )
        if kind == "overloaded_error" or status == 529:
            return LlmOverloadedError(message, status=status)
        if kind == "timeout_error" or status in (408, 504):
            return LlmTimeoutError(message, status=status)
        if kind == "api_error" or status >= 500 or midstream:
            return LlmServerError(message, status=status)
        return LlmBadRequestError(message, status=status)
    if isinstance(error, anthropic.APIResponseValidationError):
        return LlmServerError(message, status=error.status_code)
    return LlmError(message)


def _error_type(body: object) -> str | None:
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("type"), str):
            return str(inner["type"])
    return None


def _retry_after(headers: httpx2.Headers) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                continue  # an HTTP date: the SDK honoured it; we do not read the wall clock
    return None


def _arguments(value: object) -> str:
    """Tool input as JSON text; a non-object (a malformed call) is kept as its raw text."""
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value if isinstance(value, str) else json.dumps(value)


def _message_param(message: Message) -> MessageParam:
    blocks: list[TextBlockParam | ToolUseBlockParam | ToolResultBlockParam] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolCall):
            # A malformed call cannot be sent back as such: the API wants an object.
            tool_input: dict[str, Any] = block.input or {}
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": tool_input}
            )
        elif isinstance(block, ToolResult):
            result: ToolResultBlockParam = {
                "type": "tool_result",
                "tool_use_id": block.tool_call_id,
                "content": block.content,
            }
            if block.is_error:
                result["is_error"] = True
            blocks.append(result)
    if message.role == "assistant":
        return {"role": "assistant", "content": blocks}
    return {"role": "user", "content": blocks}


def _tool_param(tool: Tool) -> ToolParam:
    param: ToolParam = {"name": tool.name, "input_schema": dict(tool.input_schema)}
    if tool.description:
        param["description"] = tool.description
    return param
