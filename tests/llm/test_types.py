"""The LLM port's values, errors, stream accumulation and ChunkStream."""

from __future__ import annotations

import pytest
import trio

from kelpie_agent.errors import KelpieError
from kelpie_agent.llm import (
    ChunkStream,
    LlmBadRequestError,
    LlmConnectionError,
    LlmError,
    LlmOverloadedError,
    LlmRateLimitedError,
    LlmRequest,
    LlmResponse,
    LlmServerError,
    LlmStreamCutError,
    LlmTimeoutError,
    Message,
    StreamAccumulator,
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

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}}


def test_errors_say_whether_they_are_retryable() -> None:
    retryable = [
        LlmTimeoutError("t"),
        LlmRateLimitedError("r", retry_after=3.0),
        LlmOverloadedError("o", status=529),
        LlmServerError("s", status=500),
        LlmConnectionError("c"),
        LlmStreamCutError("cut"),
    ]
    assert all(e.retryable and isinstance(e, LlmError) for e in retryable)
    assert isinstance(LlmError("x"), KelpieError)
    assert not LlmBadRequestError("b", status=400).retryable
    assert not LlmError("generic").retryable
    limited = retryable[1]
    assert isinstance(limited, LlmRateLimitedError)
    assert limited.retry_after == 3.0 and limited.status == 429


def test_tool_call_input_parses_or_is_none() -> None:
    assert ToolCall.of("t1", "f", {"x": 1}).arguments == '{"x":1}'
    assert ToolCall("t1", "f", '{"x": 1}').input == {"x": 1}
    assert ToolCall("t1", "f", '{"x": 1').input is None
    assert ToolCall("t1", "f", "[1, 2]").input is None  # not an object


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: LlmRequest("", [Message.user("hi")]), "model must be a non-empty string"),
        (lambda: LlmRequest("m", []), "at least one message"),
        (
            lambda: LlmRequest("m", [Message.assistant("hi")]),
            "first message must come from the user",
        ),
        (
            lambda: LlmRequest("m", [Message.user("hi")], max_tokens=0),
            "max_tokens must be at least 1",
        ),
        (
            lambda: LlmRequest("m", [Message.user("hi")], max_tokens=True),
            "max_tokens must be an int",
        ),
        (lambda: Message("user", (ToolCall("a", "f"),)), "user message cannot hold a ToolCall"),
        (
            lambda: Message("assistant", (ToolResult("a", "x"),)),
            "assistant message cannot hold a ToolResult",
        ),
        (lambda: Message("system", "hi"), "role must be 'user' or 'assistant'"),  # type: ignore[arg-type]
        (lambda: Message("user", ()), "at least one content block"),
        (lambda: Tool("bad name!", "", SCHEMA), "tool names match"),
        (lambda: Tool("f", "", {"type": "string"}), "input_schema must be a JSON schema"),
        (
            lambda: LlmRequest("m", [Message.user("hi")], tools=[Tool("f"), Tool("f")]),
            "tool names must be unique; repeated: f",
        ),
        (lambda: ToolCall("", "f"), "id must be a non-empty string"),
    ],
)
def test_bad_values_raise_one_line_errors(make, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_message_helpers_and_response_to_message() -> None:
    assert Message("user", "hello").content == (TextBlock("hello"),)
    assert Message.tool_results(ToolResult("a", "ok")).role == "user"
    call = ToolCall.of("toolu_1", "f", {"x": 1})
    response = LlmResponse("msg", "m", [TextBlock(""), call], "tool_use", Usage(3, 4))
    assert response.tool_calls == (call,) and response.text == ""
    assert response.to_message() == Message("assistant", (call,))  # empty text dropped
    with pytest.raises(ValueError, match="no content"):
        LlmResponse("msg", "m", [], "end_turn").to_message()
    request = LlmRequest("m", [Message.user("hi")], tools=[Tool("f", "", SCHEMA)])
    assert request.tool("f") is not None and request.tool("g") is None


CHUNKS: list[StreamChunk] = [
    TextDelta(0, "Hello"),
    TextDelta(0, " there"),
    ToolCallStart(1, "toolu_1", "f"),
    ToolCallDelta(1, '{"x"'),
    ToolCallDelta(1, ":1}"),
    ToolCallStart(2, "toolu_2", "g"),  # no argument deltas: {}
    StreamEnd("msg_1", "m", "tool_use", Usage(5, 6)),
]


def test_accumulator_builds_the_response() -> None:
    acc = StreamAccumulator()
    for chunk in CHUNKS:
        acc.add(chunk)
    response = acc.response()
    assert response.content == (
        TextBlock("Hello there"),
        ToolCall("toolu_1", "f", '{"x":1}'),
        ToolCall("toolu_2", "g", "{}"),
    )
    assert (response.id, response.stop_reason, response.usage) == ("msg_1", "tool_use", Usage(5, 6))


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ([ToolCallDelta(0, "{")], "no tool call"),
        ([ToolCallStart(0, "a", "f"), TextDelta(0, "x")], "text delta for tool call block"),
        ([TextDelta(1, "x"), TextDelta(0, "y")], "opened after block"),
        ([ToolCallStart(0, "a", "f"), ToolCallStart(0, "b", "f")], "already open"),
        ([StreamEnd("m", "m", "end_turn", Usage()), TextDelta(0, "x")], "after the end"),
    ],
)
def test_accumulator_rejects_broken_grammar(chunks, message) -> None:  # type: ignore[no-untyped-def]
    acc = StreamAccumulator()
    with pytest.raises(ValueError, match=message):
        for chunk in chunks:
            acc.add(chunk)


def test_accumulator_response_needs_the_end() -> None:
    acc = StreamAccumulator()
    acc.add(TextDelta(0, "partial"))
    assert acc.content() == (TextBlock("partial"),)
    with pytest.raises(ValueError, match="has not ended"):
        acc.response()


async def _gen(chunks: list[StreamChunk], closed: list[bool], fail: bool = False):  # type: ignore[no-untyped-def]
    try:
        for chunk in chunks:
            await trio.lowlevel.checkpoint()
            yield chunk
        if fail:
            raise LlmStreamCutError("cut")
    finally:
        closed.append(True)


@pytest.mark.trio
async def test_chunk_stream_collects_and_closes() -> None:
    closed: list[bool] = []
    stream = ChunkStream(_gen(CHUNKS, closed))
    response = await stream.collect()
    assert response.tool_calls[0].input == {"x": 1} and closed == [True]
    assert stream.response == response


@pytest.mark.trio
async def test_chunk_stream_closes_early_and_keeps_partial_content() -> None:
    closed: list[bool] = []
    async with ChunkStream(_gen(CHUNKS, closed)) as stream:
        async for chunk in stream:
            if isinstance(chunk, ToolCallStart):
                break
    assert closed == [True]
    assert stream.received[0] == TextBlock("Hello there")
    with pytest.raises(ValueError):
        stream.response  # noqa: B018
    cut = ChunkStream(_gen(CHUNKS[:2], [], fail=True))
    with pytest.raises(LlmStreamCutError):
        await cut.collect()
    assert cut.received == (TextBlock("Hello there"),)
