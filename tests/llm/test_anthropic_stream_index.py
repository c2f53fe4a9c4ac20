"""The adapter's stream chunks carry port indexes: a chunk's ``index`` is its block's position
in the port's response, also when the API sends blocks the port leaves out (thinking)."""

from __future__ import annotations

from typing import Any

from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

from kelpie_agent.llm import StreamAccumulator, TextBlock, TextDelta, ToolCall, ToolCallDelta
from kelpie_agent.llm._anthropic import _EventReader

_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
}
_END = [
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 5},
    },
    {"type": "message_stop"},
]


def _block(index: int, start: dict[str, Any], *deltas: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": index, "content_block": start}
    ]
    events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    return [*events, {"type": "content_block_stop", "index": index}]


def _read(events: list[dict[str, Any]]) -> tuple[list[Any], Any]:
    reader, acc = _EventReader(), StreamAccumulator()
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    chunks = []
    for event in events:
        chunk = reader.read(adapter.validate_python(event))
        if chunk is not None:
            chunks.append(chunk)
            acc.add(chunk)
    return chunks, acc.response()


def test_chunks_index_the_port_response_when_the_api_sends_a_thinking_block() -> None:
    events = [
        _START,
        *_block(
            0,
            {"type": "thinking", "thinking": "", "signature": ""},
            {"type": "thinking_delta", "thinking": "let me see"},
            {"type": "signature_delta", "signature": "sig"},
        ),
        *_block(1, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Looking."}),
        *_block(
            2,
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
            {"type": "input_json_delta", "partial_json": '{"q": 1}'},
        ),
        *_END,
    ]
    chunks, response = _read(events)
    assert response.content == (TextBlock("Looking."), ToolCall("toolu_1", "lookup", '{"q": 1}'))
    for chunk in chunks:
        if isinstance(chunk, TextDelta):
            assert isinstance(response.content[chunk.index], TextBlock)
        elif isinstance(chunk, ToolCallDelta):
            assert isinstance(response.content[chunk.index], ToolCall)


def test_a_text_block_without_text_takes_no_position() -> None:
    events = [
        _START,
        *_block(0, {"type": "text", "text": ""}),  # opened and closed with nothing in it
        *_block(
            1,
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
            {"type": "input_json_delta", "partial_json": "{}"},
        ),
        *_END,
    ]
    chunks, response = _read(events)
    assert response.content == (ToolCall("toolu_1", "lookup", "{}"),)
    assert {c.index for c in chunks if hasattr(c, "index")} == {0}
