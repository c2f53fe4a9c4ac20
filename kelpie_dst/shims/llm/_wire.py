"""The Anthropic Messages API on the wire: request JSON in, message JSON and SSE events out.

Shapes follow the installed SDK's types (``anthropic.types.Message``, ``RawMessageStartEvent``,
``RawContentBlockStartEvent``, ``RawContentBlockDeltaEvent`` with ``text_delta`` and
``input_json_delta``, ``RawContentBlockStopEvent``, ``RawMessageDeltaEvent``,
``RawMessageStopEvent``, and ``ErrorResponse``). Only text, tool_use and tool_result blocks
and custom tools are supported; anything else is a 400 naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kelpie_agent.llm import (
    ContentBlock,
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
)

__all__ = ["SseEncoder", "WireError", "error_json", "message_json", "parse_request", "sse_event"]

# Accepted and ignored: they change sampling or billing, not the shape of the answer.
_IGNORED = {
    "temperature", "top_p", "top_k", "stop_sequences", "metadata", "tool_choice",
    "service_tier", "inference_geo", "speed", "cache_control", "diagnostics",
}  # fmt: skip
_BLOCK_EXTRAS = {"cache_control", "citations"}


class WireError(ValueError):
    """A request the API rejects with 400 ``invalid_request_error``."""


def _need(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise WireError(f"{where}{key}: Field required")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise WireError(f"{where}{key}: Input should be a valid {name}")
    return value


def _extra(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in sorted(set(data) - allowed):
        raise WireError(f"{where}{key}: Extra inputs are not permitted")


def _text_of(value: Any, where: str) -> str:
    """A string, or a list of text blocks (system prompts, tool results)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise WireError(f"{where}: Input should be a valid string or list of text blocks")
    parts = []
    for i, block in enumerate(value):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise WireError(f"{where}.{i}: the simulated API supports text blocks here only")
        parts.append(_need(block, "text", str, f"{where}.{i}."))
    return "".join(parts)


def _block(data: Any, where: str) -> ContentBlock:
    if not isinstance(data, Mapping):
        raise WireError(f"{where}: Input should be a valid dictionary")
    kind = data.get("type")
    if kind == "text":
        _extra(data, {"type", "text", *_BLOCK_EXTRAS}, f"{where}.")
        return TextBlock(_need(data, "text", str, f"{where}."))
    if kind == "tool_use":
        _extra(data, {"type", "id", "name", "input", *_BLOCK_EXTRAS}, f"{where}.")
        args = _need(data, "input", dict, f"{where}.")
        call_id, name = _need(data, "id", str, f"{where}."), _need(data, "name", str, f"{where}.")
        return ToolCall.of(call_id, name, args)
    if kind == "tool_result":
        _extra(data, {"type", "tool_use_id", "content", "is_error", *_BLOCK_EXTRAS}, f"{where}.")
        content = _text_of(data.get("content", ""), f"{where}.content")
        is_error = data.get("is_error", False)
        if not isinstance(is_error, bool):
            raise WireError(f"{where}.is_error: Input should be a valid boolean")
        return ToolResult(_need(data, "tool_use_id", str, f"{where}."), content, is_error)
    raise WireError(
        f"{where}.type: the simulated API supports 'text', 'tool_use' and 'tool_result' "
        f"blocks, got {kind!r}"
    )


def _message(data: Any, where: str) -> Message:
    if not isinstance(data, Mapping):
        raise WireError(f"{where}: Input should be a valid dictionary")
    _extra(data, {"role", "content"}, f"{where}.")
    role = _need(data, "role", str, f"{where}.")
    if role not in ("user", "assistant"):
        raise WireError(f"{where}.role: Input should be 'user' or 'assistant'")
    content = _need(data, "content", (str, list), f"{where}.")
    if isinstance(content, str):
        return Message(role, (TextBlock(content),))
    return Message(role, tuple(_block(b, f"{where}.content.{i}") for i, b in enumerate(content)))


def _tool(data: Any, where: str) -> Tool:
    if not isinstance(data, Mapping):
        raise WireError(f"{where}: Input should be a valid dictionary")
    if data.get("type", "custom") != "custom":
        raise WireError(f"{where}.type: the simulated API supports custom tools only")
    _extra(data, {"type", "name", "description", "input_schema", "cache_control"}, f"{where}.")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise WireError(f"{where}.description: Input should be a valid string")
    schema = _need(data, "input_schema", dict, f"{where}.")
    return Tool(_need(data, "name", str, f"{where}."), description, schema)


def parse_request(data: Any) -> tuple[LlmRequest, bool]:
    """The request in a ``POST /v1/messages`` body, and whether it asks for a stream.

    Raises :class:`WireError` with the API-style message for anything the API rejects."""
    if not isinstance(data, Mapping):
        raise WireError("the request body must be a JSON object")
    _extra(data, {"model", "max_tokens", "messages", "system", "tools", "stream", *_IGNORED}, "")
    model = _need(data, "model", str, "")
    max_tokens = _need(data, "max_tokens", int, "")
    raw_messages = _need(data, "messages", list, "")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise WireError("stream: Input should be a valid boolean")
    system = _text_of(data.get("system", ""), "system")
    raw_tools = data.get("tools", [])
    if not isinstance(raw_tools, list):
        raise WireError("tools: Input should be a valid list")
    try:
        messages = tuple(_message(m, f"messages.{i}") for i, m in enumerate(raw_messages))
        tools = tuple(_tool(t, f"tools.{i}") for i, t in enumerate(raw_tools))
        request = LlmRequest(model, messages, system, tools, max_tokens)
    except WireError:
        raise
    except ValueError as error:
        raise WireError(str(error)) from None
    return request, stream


def _input_of(call: ToolCall) -> Any:
    """The tool_use ``input``: the arguments object, or (malformed) the raw text."""
    parsed = call.input
    return parsed if parsed is not None else call.arguments


def _usage(response: LlmResponse, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": response.usage.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message_json(response: LlmResponse) -> dict[str, Any]:
    """The JSON body of a non-streamed answer."""
    content: list[dict[str, Any]] = []
    for block in response.content:
        if isinstance(block, TextBlock):
            content.append({"type": "text", "text": block.text})
        else:
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": _input_of(block)}
            )
    return {
        "id": response.id,
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": content,
        "stop_reason": response.stop_reason,
        "stop_sequence": None,
        "usage": _usage(response, response.usage.output_tokens),
    }


def error_json(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }


def sse_event(name: str, data: Mapping[str, Any]) -> bytes:
    """One server-sent event, as the API writes it."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class SseEncoder:
    """Server-sent events for one streamed answer, in the API's exact order."""

    def __init__(self) -> None:
        self._open: int | None = None

    def start(self, response: LlmResponse) -> bytes:
        message = message_json(response)
        message.update(content=[], stop_reason=None, usage=_usage(response, 1))
        return sse_event(
            "message_start", {"type": "message_start", "message": message}
        ) + sse_event("ping", {"type": "ping"})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        index, self._open = self._open, None
        return sse_event("content_block_stop", {"type": "content_block_stop", "index": index})

    def _start(self, index: int, block: Mapping[str, Any]) -> bytes:
        out = self._close()
        self._open = index
        data = {"type": "content_block_start", "index": index, "content_block": block}
        return out + sse_event("content_block_start", data)

    def chunk(self, chunk: StreamChunk) -> bytes:
        if isinstance(chunk, StreamEnd):
            stop = {"stop_reason": chunk.stop_reason, "stop_sequence": None}
            # cumulative, as the API sends them (the input count again, not an increment)
            usage = {
                "input_tokens": chunk.usage.input_tokens,
                "output_tokens": chunk.usage.output_tokens,
            }
            data = {"type": "message_delta", "delta": stop, "usage": usage}
            return (
                self._close()
                + sse_event("message_delta", data)
                + sse_event("message_stop", {"type": "message_stop"})
            )
        out = b""
        if isinstance(chunk, ToolCallStart):
            block = {"type": "tool_use", "id": chunk.id, "name": chunk.name, "input": {}}
            return self._start(chunk.index, block)
        if isinstance(chunk, TextDelta):
            if self._open != chunk.index:
                out = self._start(chunk.index, {"type": "text", "text": ""})
            delta: dict[str, Any] = {"type": "text_delta", "text": chunk.text}
        else:
            assert isinstance(chunk, ToolCallDelta)
            delta = {"type": "input_json_delta", "partial_json": chunk.partial_json}
        body: dict[str, Any] = {"type": "content_block_delta", "index": chunk.index, "delta": delta}
        return out + sse_event("content_block_delta", body)
