"""A conformance suite for implementations of the LLM port.

Give it a client and it checks what the port promises (docs/llm.md): answers, tool calls and
their round trip, the grammar of streams, rejected requests, and ``max_tokens`` stops::

    await check_llm_conformance(AnthropicLlm())                      # the real API
    await check_llm_conformance(SimLlmClient(policy_from_dict(CONFORMANCE_SCRIPT)))

The prompts ask for specific behaviour that a real model follows; :data:`CONFORMANCE_SCRIPT`
is the SimLLM rule set (plain data) that makes a simulated model follow it too. ``CHECKS``
names the checks one by one so a test suite can report them separately (see
:func:`run_check`). Every check raises ``AssertionError`` with a one-line reason on failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._errors import LlmBadRequestError, LlmError
from ._port import LlmClient, StreamAccumulator
from ._types import (
    STOP_REASONS,
    LlmRequest,
    LlmResponse,
    Message,
    StreamChunk,
    StreamEnd,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
)

__all__ = [
    "CHECKS",
    "CONFORMANCE_SCRIPT",
    "DEFAULT_MODEL",
    "WEATHER",
    "check_chunks",
    "check_llm_conformance",
    "run_check",
]

DEFAULT_MODEL = "claude-haiku-4-5"
WEATHER = Tool(
    "get_weather",
    "Get the current weather in a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"}},
        "required": ["city"],
    },
)
GREET = "Reply with a short friendly greeting, nothing else."
ASK_WEATHER = "What is the weather in Paris right now? Use the get_weather tool."
COUNT = "Count from 1 to 300 in words, separated by commas."
CONFORMANCE_SCRIPT: dict[str, Any] = {
    "mode": "scripted",
    "rules": [
        {"when": {"user": "short friendly greeting"}, "text": "Hello there, nice to meet you!"},
        {
            "when": {"user": "weather in Paris"},
            "text": "Let me check the weather in Paris.",
            "tool_calls": [{"name": "get_weather", "input": {"city": "Paris"}}],
        },
        {"when": {"tool": "get_weather"}, "text": "In Paris it is {text} right now."},
        {"when": {"user": "Count from 1 to 300"}, "text": ", ".join(["number"] * 300)},
    ],
}
Check = Callable[[LlmClient, str], Awaitable[None]]


def _request(model: str, *messages: Message, tools: Sequence[Tool] = (), **kw: Any) -> LlmRequest:
    return LlmRequest(model, messages, tools=tuple(tools), max_tokens=kw.get("max_tokens", 300))


def _check_response(response: LlmResponse) -> None:
    assert isinstance(response, LlmResponse), f"not an LlmResponse: {response!r}"
    assert response.id and response.model, f"response without id/model: {response!r}"
    assert response.stop_reason in STOP_REASONS, f"unknown stop reason {response.stop_reason!r}"
    assert response.usage.input_tokens > 0, f"no input tokens counted: {response.usage}"
    assert response.usage.output_tokens > 0, f"no output tokens counted: {response.usage}"
    for call in response.tool_calls:
        assert call.id, f"tool call without id: {call!r}"


def check_chunks(chunks: Sequence[StreamChunk]) -> LlmResponse:
    """Check a complete stream's grammar; return the response it describes."""
    assert chunks, "a stream produced no chunks"
    assert isinstance(chunks[-1], StreamEnd), f"a stream must end with StreamEnd: {chunks[-1]!r}"
    started: set[int] = set()
    acc = StreamAccumulator()
    for chunk in chunks:
        if isinstance(chunk, ToolCallStart):
            started.add(chunk.index)
        if isinstance(chunk, ToolCallDelta):
            assert chunk.index in started, f"arguments before the tool call started: {chunk!r}"
        try:
            acc.add(chunk)
        except ValueError as error:
            raise AssertionError(f"stream grammar broken: {error}") from None
    return acc.response()


async def _collect(client: LlmClient, request: LlmRequest) -> list[StreamChunk]:
    chunks: list[StreamChunk] = []
    async with client.stream(request) as stream:
        async for chunk in stream:
            chunks.append(chunk)
    return chunks


def _weather_call(response: LlmResponse) -> ToolCall:
    assert response.stop_reason == "tool_use", f"expected a tool call, got {response!r}"
    calls = [c for c in response.tool_calls if c.name == WEATHER.name]
    assert calls, f"expected a get_weather call, got {response.tool_calls!r}"
    args = calls[0].input
    assert args is not None and isinstance(args.get("city"), str), f"bad arguments {calls[0]!r}"
    assert "paris" in args["city"].lower(), f"expected Paris, got {args!r}"
    return calls[0]


async def check_text(client: LlmClient, model: str) -> None:
    response = await client.complete(_request(model, Message.user(GREET)))
    _check_response(response)
    assert response.stop_reason == "end_turn", f"expected end_turn, got {response.stop_reason!r}"
    assert response.text.strip() and not response.tool_calls, f"expected text: {response!r}"


async def check_tool_call(client: LlmClient, model: str) -> None:
    response = await client.complete(_request(model, Message.user(ASK_WEATHER), tools=[WEATHER]))
    _check_response(response)
    _weather_call(response)


async def check_tool_round_trip(client: LlmClient, model: str) -> None:
    ask = Message.user(ASK_WEATHER)
    first = await client.complete(_request(model, ask, tools=[WEATHER]))
    call = _weather_call(first)
    results = [ToolResult(c.id, "18 degrees and sunny") for c in first.tool_calls]
    reply = Message.tool_results(*results)
    second = await client.complete(_request(model, ask, first.to_message(), reply, tools=[WEATHER]))
    _check_response(second)
    assert second.stop_reason == "end_turn", f"expected end_turn after {call.name}: {second!r}"
    assert second.text.strip(), f"expected an answer after the tool result: {second!r}"


async def check_stream_text(client: LlmClient, model: str) -> None:
    chunks = await _collect(client, _request(model, Message.user(GREET)))
    response = check_chunks(chunks)
    _check_response(response)
    assert response.stop_reason == "end_turn" and response.text.strip(), f"bad {response!r}"


async def check_stream_tool_call(client: LlmClient, model: str) -> None:
    request = _request(model, Message.user(ASK_WEATHER), tools=[WEATHER])
    chunks = await _collect(client, request)
    response = check_chunks(chunks)
    _check_response(response)
    _weather_call(response)
    assert any(isinstance(c, ToolCallDelta) for c in chunks), "tool arguments were not streamed"


async def check_bad_request(client: LlmClient, model: str) -> None:
    """A tool result that answers no tool call is rejected, whole or streamed."""
    orphan = Message.tool_results(ToolResult("toolu_does_not_exist", "42"))
    request = _request(
        model, Message.user(GREET), Message.assistant("Hi!"), orphan, tools=[WEATHER]
    )
    for attempt in ("complete", "stream"):
        try:
            if attempt == "complete":
                await client.complete(request)
            else:
                await _collect(client, request)
        except LlmBadRequestError as error:
            assert not error.retryable, "a bad request must not be retryable"
        except LlmError as error:
            raise AssertionError(f"{attempt}: expected LlmBadRequestError, got {error!r}") from None
        else:
            raise AssertionError(f"{attempt}: an orphan tool result was accepted")


async def check_max_tokens(client: LlmClient, model: str) -> None:
    request = _request(model, Message.user(COUNT), max_tokens=5)
    response = await client.complete(request)
    assert response.stop_reason == "max_tokens", f"expected max_tokens, got {response!r}"
    assert 0 < response.usage.output_tokens <= 5, f"usage beyond max_tokens: {response.usage}"
    streamed = check_chunks(await _collect(client, request))
    assert streamed.stop_reason == "max_tokens", f"stream: expected max_tokens: {streamed!r}"


CHECKS: dict[str, Check] = {
    "text": check_text,
    "tool_call": check_tool_call,
    "tool_round_trip": check_tool_round_trip,
    "stream_text": check_stream_text,
    "stream_tool_call": check_stream_tool_call,
    "bad_request": check_bad_request,
    "max_tokens": check_max_tokens,
}


async def run_check(name: str, client: LlmClient, model: str = DEFAULT_MODEL) -> None:
    """Run the check called ``name`` (a key of :data:`CHECKS`)."""
    await CHECKS[name](client, model)


async def check_llm_conformance(client: LlmClient, model: str = DEFAULT_MODEL) -> None:
    """Run every check, in order."""
    for name in CHECKS:
        await run_check(name, client, model)
