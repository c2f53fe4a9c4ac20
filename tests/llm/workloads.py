"""Small LLM workloads shared by the tests, importable by name (fresh-process determinism)."""

from __future__ import annotations

import ssl
from typing import Any

import anthropic
import trio

import kelpie_dst
from kelpie_agent.llm import (
    AnthropicLlm,
    LlmClient,
    LlmError,
    LlmRequest,
    LlmResponse,
    Message,
    Tool,
    ToolResult,
)
from kelpie_dst.shims.llm import SimLlmClient, policy_from_dict, start_anthropic_host

MODEL = "claude-sim-1"
WEATHER = Tool(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
FORECAST = {"Paris": "sunny", "Oslo": "snowing"}
SCRIPT: dict[str, Any] = {
    "mode": "scripted",
    "default": "I can only talk about the weather.",
    "rules": [
        {
            "when": {"user_regex": r"(?i)weather in (?P<city>\w+)"},
            "text": "Let me check {city}.",
            "tool_calls": [{"name": "get_weather", "input": {"city": "{city}"}}],
        },
        {"when": {"tool": "get_weather"}, "text": "It is {text} there."},
    ],
}
POLICY = policy_from_dict(SCRIPT)


# Each AnthropicLlm builds an SSL context (~35 ms: it loads the CA bundle). Tests that make
# one client per seed share a context; the acceptance workload below uses the plain default.
_SSL = ssl.create_default_context()


def sdk_llm(base_url: str, *, max_retries: int = 2, timeout: float = 600.0) -> AnthropicLlm:
    """AnthropicLlm on the SDK's default HTTP client, with a shared SSL context."""
    client = anthropic.DefaultAsyncHttpxClient(verify=_SSL)
    return AnthropicLlm(
        base_url=base_url,
        api_key="sim",
        max_retries=max_retries,
        timeout=timeout,
        http_client=client,
    )


def weather_request(text: str) -> LlmRequest:
    return LlmRequest(MODEL, [Message.user(text)], tools=(WEATHER,), max_tokens=200)


def get_weather(city: str) -> str:
    return FORECAST.get(city, "unknown")


async def ask(llm: LlmClient, request: LlmRequest, *, stream: bool) -> tuple[LlmResponse, int]:
    """One answer, retrying retryable errors (after ``retry_after`` or a second)."""
    retries = 0
    while True:
        try:
            if stream:
                return await llm.stream(request).collect(), retries
            return await llm.complete(request), retries
        except LlmError as error:
            if not error.retryable or retries >= 20:
                raise
            retries += 1
            kelpie_dst.log("llm retry", error=type(error).__name__)
            await trio.sleep(getattr(error, "retry_after", None) or 1.0)


async def weather_chat(llm: LlmClient, city: str, *, stream: bool) -> tuple[str, int]:
    """A tool-use conversation: ask, run the tool calls, answer. Returns (answer, retries)."""
    messages = [Message.user(f"What is the weather in {city}?")]
    retries = 0
    for _ in range(5):
        request = LlmRequest(MODEL, messages, tools=(WEATHER,), max_tokens=200)
        response, tried = await ask(llm, request, stream=stream)
        retries += tried
        messages.append(response.to_message())
        if not response.tool_calls:
            return response.text, retries
        results = []
        for call in response.tool_calls:
            assert call.name == "get_weather" and call.input is not None, call
            results.append(ToolResult(call.id, get_weather(**call.input)))
        messages.append(Message.tool_results(*results))
    raise AssertionError("the conversation did not end")


async def sdk_conversations(sim: kelpie_dst.Simulation) -> dict[str, Any]:
    """The real SDK through AnthropicLlm against the simulated host: one whole-answer and one
    streamed tool-use conversation (the acceptance workload)."""
    host = await start_anthropic_host(sim, POLICY)
    async with AnthropicLlm(base_url=host.base_url, api_key="sim", max_retries=3) as llm:
        whole = await weather_chat(llm, "Paris", stream=False)
        streamed = await weather_chat(llm, "Oslo", stream=True)
    return {
        "whole": whole[0],
        "streamed": streamed[0],
        "retries": whole[1] + streamed[1],
        "statuses": dict(sorted(host.statuses.items())),
    }


async def direct_conversations(sim: kelpie_dst.Simulation) -> dict[str, Any]:
    """The same conversations through SimLlmClient."""
    llm = SimLlmClient(POLICY)
    whole = await weather_chat(llm, "Paris", stream=False)
    streamed = await weather_chat(llm, "Oslo", stream=True)
    return {"whole": whole[0], "streamed": streamed[0], "retries": whole[1] + streamed[1]}


CHAOS_FAULTS = [
    "llm.timeout=0.05",
    "llm.rate_limited=0.1",
    "llm.overloaded=0.1",
    "llm.server_error=0.1",
    "llm.malformed_tool_call=0.2",
    "llm.unknown_tool=0.2",
    "llm.stream_cut=0.2",
    "llm.max_tokens=0.2",
    "network.delay=0.05",
    "network.reset=0.01",
]


async def adversarial_chaos(sim: kelpie_dst.Simulation) -> dict[str, int]:
    """The adversarial policy behind both plugs, under every llm fault: every call ends in an
    answer or an LlmError, never anything else."""
    from kelpie_dst.shims.llm import AdversarialPolicy

    policy = AdversarialPolicy(p_text=0.2, p_unknown_tool=0.1, p_invalid=0.3)
    host = await start_anthropic_host(sim, policy)
    outcomes: dict[str, int] = {}
    clients: list[LlmClient] = [SimLlmClient(policy), sdk_llm(host.base_url, timeout=20.0)]
    for i in range(6):
        for llm in clients:
            stream = i % 2 == 1
            request = weather_request("weather in Oslo")
            try:
                with trio.fail_after(600):
                    call = llm.stream(request).collect() if stream else llm.complete(request)
                    key = (await call).stop_reason
            except LlmError as error:
                key = type(error).__name__
            outcomes[key] = outcomes.get(key, 0) + 1
    return dict(sorted(outcomes.items()))
