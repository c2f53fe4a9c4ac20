"""AnthropicLlm's stream: an answer whose ``message_stop`` arrived is complete, whatever the
connection does afterwards (a cut while the adapter drains the rest of the body is not the
answer's failure: the agent would ask the model again for an answer it already has); a cut
before ``message_stop`` still fails the stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import trio

from kelpie_agent.llm import AnthropicLlm, LlmRequest, LlmStreamCutError, Message, TextBlock
from kelpie_agent.llm._types import StreamEnd, TextDelta

EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 7, "output_tokens": 0},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 2},
    },
    {"type": "message_stop"},
]


class _Body(httpx2.AsyncByteStream):
    """The SSE events up to ``upto``, then a connection reset."""

    def __init__(self, upto: int) -> None:
        self.upto = upto

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in EVENTS[: self.upto]:
            yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
        raise httpx2.ReadError("connection reset by peer")

    async def aclose(self) -> None:
        pass


def _llm(upto: int) -> AnthropicLlm:
    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, stream=_Body(upto))

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return AnthropicLlm(api_key="test", max_retries=0, http_client=client)


REQUEST = LlmRequest("claude-x", (Message("user", (TextBlock("hello"),)),), max_tokens=64)


async def _chunks(upto: int) -> list[object]:
    llm = _llm(upto)
    try:
        return [chunk async for chunk in llm.stream(REQUEST)]
    finally:
        await llm.aclose()


def test_a_cut_after_message_stop_leaves_the_answer_whole() -> None:
    chunks = trio.run(_chunks, len(EVENTS))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["hi"]
    end = chunks[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "end_turn"


def test_a_cut_before_message_stop_fails_the_stream() -> None:
    with pytest.raises(LlmStreamCutError):
        trio.run(_chunks, len(EVENTS) - 1)
