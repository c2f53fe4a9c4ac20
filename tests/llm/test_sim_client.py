"""SimLlmClient and its engine: virtual latency, the API's request rules, max_tokens, and
bad input."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import trio

import kelpie_dst
from kelpie_agent.llm import (
    LlmBadRequestError,
    LlmRequest,
    Message,
    StreamEnd,
    TextDelta,
    Tool,
    ToolCall,
    ToolResult,
)
from kelpie_dst.shims.llm import (
    LlmTiming,
    ScriptedPolicy,
    SimLlmClient,
    check_api_rules,
)

WORDS = " ".join(f"w{i}" for i in range(40))  # 40 tokens
TALK = ScriptedPolicy.from_dict({"rules": [{"text": WORDS}]})
TIMING = LlmTiming(ttft_min=0.5, ttft_max=1.5, tokens_per_second=20.0)
TOOL = Tool("f", "", {"type": "object", "properties": {}})


def request(max_tokens: int = 100) -> LlmRequest:
    return LlmRequest("m", [Message.user("go")], max_tokens=max_tokens)


@pytest.mark.dst(seeds=20)
async def test_latency_is_virtual_ttft_then_tokens_per_second(dst: kelpie_dst.Simulation) -> None:
    llm = SimLlmClient(TALK, timing=TIMING)
    start = trio.current_time()
    response = await llm.complete(request())
    took = trio.current_time() - start
    assert response.usage.output_tokens == 40
    assert 0.5 + 40 / 20 <= took <= 1.5 + 40 / 20
    arrivals = []
    start = trio.current_time()
    async for chunk in llm.stream(request()):
        arrivals.append((trio.current_time() - start, chunk))
    first, _ = arrivals[0]
    assert 0.5 + 1 / 20 <= first <= 1.5 + 1 / 20  # time to first token, then the token
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals[:-1])]
    assert all(math.isclose(g, 1 / 20) for g in gaps)
    assert isinstance(arrivals[-1][1], StreamEnd)


@pytest.mark.trio
async def test_outside_a_simulation_it_works_in_real_time() -> None:
    llm = SimLlmClient(TALK, timing=LlmTiming.instant(), seed=3)
    first = await llm.complete(request())
    again = await SimLlmClient(TALK, timing=LlmTiming.instant(), seed=3).complete(request())
    assert first == again and first.text == WORDS  # seeded ids, no faults


@pytest.mark.trio
async def test_max_tokens_cuts_the_answer() -> None:
    llm = SimLlmClient(TALK, timing=LlmTiming.instant())
    response = await llm.complete(request(max_tokens=5))
    assert response.stop_reason == "max_tokens" and response.text == "w0 w1 w2 w3 w4"
    assert response.usage.output_tokens == 5
    deltas = [c async for c in llm.stream(request(max_tokens=5)) if isinstance(c, TextDelta)]
    assert len(deltas) == 5


def _call(call_id: str) -> ToolCall:
    return ToolCall(call_id, "f", "{}")


RULES = [
    ([Message.user("hi")], None),
    ([Message.user(" ")], "text content blocks must contain non-whitespace text"),
    (
        [Message.user("hi"), Message("assistant", (_call("a"),)), Message.user("no result")],
        "`tool_use` ids were found without `tool_result` blocks immediately after: a",
    ),
    (
        [
            Message.user("hi"),
            Message("assistant", (_call("a"),)),
            Message.tool_results(ToolResult("a", "x"), ToolResult("b", "x")),
        ],
        "unexpected `tool_use_id` found in `tool_result` blocks: b",
    ),
    (
        [
            Message.user("hi"),
            Message("assistant", (_call("a"),)),
            Message("user", (Message.user("and").content[0], ToolResult("a", "x"))),
        ],
        "`tool_result` blocks must come before any other content",
    ),
    (
        [
            Message.user("hi"),
            Message("assistant", (_call("a"),)),
            Message.tool_results(ToolResult("a", "x")),
        ],
        None,
    ),
    (
        [Message.user("hi"), Message("assistant", (_call("a"),))],
        None,
    ),  # the last turn may be a call
]


@pytest.mark.parametrize(("messages", "problem"), RULES)
def test_api_rules(messages: list[Message], problem: str | None) -> None:
    got = check_api_rules(LlmRequest("m", messages, tools=[TOOL]))
    assert (got is None) if problem is None else (got is not None and problem in got), got


def test_tool_blocks_need_tools() -> None:
    messages = [Message.user("hi"), Message("assistant", (_call("a"),))]
    assert "must define tools" in str(check_api_rules(LlmRequest("m", messages)))


@pytest.mark.trio
async def test_bad_requests_and_bad_input() -> None:
    llm = SimLlmClient(TALK, timing=LlmTiming.instant())
    orphan = LlmRequest(
        "m",
        [Message.user("hi"), Message.assistant("x"), Message.tool_results(ToolResult("z", "1"))],
        tools=[TOOL],
    )
    with pytest.raises(LlmBadRequestError, match="unexpected `tool_use_id`"):
        await llm.complete(orphan)
    with pytest.raises(LlmBadRequestError):
        await llm.stream(orphan).collect()
    with pytest.raises(TypeError, match="expected an LlmRequest"):
        await llm.complete("hello")  # type: ignore[arg-type]

    class Broken:
        def respond(self, request: LlmRequest, rng: random.Random) -> object:
            return ["not a tuple"]

    with pytest.raises(TypeError, match="must return a tuple of str/Call"):
        await SimLlmClient(Broken()).complete(request())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttft_min <= ttft_max"):
        LlmTiming(ttft_min=2.0, ttft_max=1.0)
    with pytest.raises(ValueError, match="tokens_per_second must be > 0"):
        LlmTiming(tokens_per_second=0)
