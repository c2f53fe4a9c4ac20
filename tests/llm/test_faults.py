"""Each ``llm.*`` fault's observable effect, through SimLlmClient and through the real SDK on
the simulated API host, over SEEDS seeds each. Each seed calls the direct client both ways
and the host one way (whole answers on even seeds, streams on odd ones)."""

from __future__ import annotations

import json

import pytest
import trio

import kelpie_dst
from kelpie_agent.llm import (
    AnthropicLlm,
    LlmClient,
    LlmError,
    LlmOverloadedError,
    LlmRateLimitedError,
    LlmResponse,
    LlmServerError,
    LlmStreamCutError,
    LlmTimeoutError,
    StreamEnd,
)
from kelpie_dst import Fault
from kelpie_dst.shims.llm import FAULTS, SimLlmClient, start_anthropic_host

from .workloads import MODEL, POLICY, sdk_llm, weather_request

SEEDS = 100


def fault(name: str, **params: float) -> Fault:
    return Fault(name, 1.0, params=tuple(sorted(params.items())))


async def sdk(sim: kelpie_dst.Simulation, max_retries: int = 2) -> AnthropicLlm:
    host = await start_anthropic_host(sim, POLICY)
    return sdk_llm(host.base_url, max_retries=max_retries)


async def answer(llm: LlmClient, stream: bool, text: str = "weather in Paris") -> LlmResponse:
    request = weather_request(text)
    return await (llm.stream(request).collect() if stream else llm.complete(request))


async def failure(llm: LlmClient, stream: bool) -> tuple[LlmError, float]:
    """The error a call raises, and the virtual seconds it took."""
    start = trio.current_time()
    with pytest.raises(LlmError) as info:
        await answer(llm, stream)
    return info.value, trio.current_time() - start


def test_every_llm_fault_is_registered_with_zero_default_probability() -> None:
    names = {spec.name for spec in FAULTS}
    assert names == {
        "llm.timeout",
        "llm.rate_limited",
        "llm.overloaded",
        "llm.server_error",
        "llm.malformed_tool_call",
        "llm.unknown_tool",
        "llm.stream_cut",
        "llm.max_tokens",
        "llm.stream_stall",
        "llm.answer_cut",
    }
    assert names <= set(kelpie_dst.fault_types())
    result = kelpie_dst.run(_clean)
    assert result.ok and result.faults_fired == {}


async def _clean() -> None:
    await answer(SimLlmClient(POLICY), stream=True)


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.timeout", after=5.0)])
async def test_timeout(dst: kelpie_dst.Simulation) -> None:
    for stream in (False, True):
        error, took = await failure(SimLlmClient(POLICY), stream)
        assert isinstance(error, LlmTimeoutError) and took == 5.0
    stream = dst.seed % 2 == 1
    url = (await start_anthropic_host(dst, POLICY)).base_url
    patient = sdk_llm(url, max_retries=0, timeout=30.0)
    error, took = await failure(patient, stream)  # the host answers 504 after 5 s
    assert isinstance(error, LlmTimeoutError) and error.status == 504 and took >= 5.0
    hasty = sdk_llm(url, max_retries=0, timeout=2.0)
    error, took = await failure(hasty, stream)  # the SDK gives up first
    assert isinstance(error, LlmTimeoutError) and error.status is None and 2.0 <= took < 5.0


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.rate_limited", retry_after=7.0)])
async def test_rate_limited(dst: kelpie_dst.Simulation) -> None:
    for stream in (False, True):
        error, _ = await failure(SimLlmClient(POLICY), stream)
        assert isinstance(error, LlmRateLimitedError) and error.retry_after == 7.0
    host = await start_anthropic_host(dst, POLICY)
    llm = sdk_llm(host.base_url, max_retries=2)
    error, took = await failure(llm, dst.seed % 2 == 1)
    assert isinstance(error, LlmRateLimitedError) and error.retry_after == 7.0
    assert host.statuses == {429: 3} and took >= 14.0  # the SDK slept retry-after twice


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.overloaded")])
async def test_overloaded(dst: kelpie_dst.Simulation) -> None:
    for stream in (False, True):
        error, _ = await failure(SimLlmClient(POLICY), stream)
        assert isinstance(error, LlmOverloadedError) and error.retryable
    error, _ = await failure(await sdk(dst, max_retries=0), dst.seed % 2 == 1)
    assert isinstance(error, LlmOverloadedError) and error.status == 529


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.server_error")])
async def test_server_error(dst: kelpie_dst.Simulation) -> None:
    for stream in (False, True):
        error, _ = await failure(SimLlmClient(POLICY), stream)
        assert isinstance(error, LlmServerError) and error.retryable
    error, _ = await failure(await sdk(dst, max_retries=0), dst.seed % 2 == 1)
    assert isinstance(error, LlmServerError) and error.status == 500


def _broken_call(response: LlmResponse) -> None:
    [call] = response.tool_calls
    assert call.name == "get_weather" and call.input is None
    with pytest.raises(ValueError):
        json.loads(call.arguments)


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.malformed_tool_call")])
async def test_malformed_tool_call(dst: kelpie_dst.Simulation) -> None:
    for stream in (False, True):
        _broken_call(await answer(SimLlmClient(POLICY), stream))
    response = await answer(await sdk(dst), dst.seed % 2 == 1)
    _broken_call(response)
    assert response.stop_reason == "tool_use"
    plain = await answer(SimLlmClient(POLICY), False, "hello")  # no tool call: nothing to break
    assert not plain.tool_calls


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.unknown_tool")])
async def test_unknown_tool(dst: kelpie_dst.Simulation) -> None:
    for stream in (False, True):
        for text in ("weather in Paris", "hello"):  # a call is renamed, or added
            response = await answer(SimLlmClient(POLICY), stream, text)
            assert response.tool_calls and response.stop_reason == "tool_use"
            assert all(c.name != "get_weather" and c.input is not None for c in response.tool_calls)
    response = await answer(await sdk(dst), dst.seed % 2 == 1)
    assert [c.name for c in response.tool_calls] != ["get_weather"]


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.stream_cut")])
async def test_stream_cut(dst: kelpie_dst.Simulation) -> None:
    llms: list[LlmClient] = [SimLlmClient(POLICY), await sdk(dst)]
    for llm in llms:
        stream = llm.stream(weather_request("weather in Paris"))
        seen = []
        with pytest.raises(LlmStreamCutError):
            async for chunk in stream:
                seen.append(chunk)
        assert not any(isinstance(c, StreamEnd) for c in seen)
        whole = await answer(llm, False)  # whole answers are not streams: unaffected
        assert whole.stop_reason == "tool_use"


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.answer_cut")])
async def test_answer_cut(dst: kelpie_dst.Simulation) -> None:
    """A whole answer cut short (as a buffering gateway returns a broken stream): the wire
    carries the blocks up to the first tool call, its input cut, with stop_reason null; both
    ports raise a retryable LlmServerError, and streams are not affected."""
    host = await start_anthropic_host(dst, POLICY)
    raw = await sdk_llm(host.base_url).client.messages.create(
        model=MODEL, max_tokens=200, messages=[{"role": "user", "content": "weather in Paris"}]
    )
    assert raw.stop_reason is None
    text, call = raw.content  # the text, and the tool call as a partial-JSON parser reads it
    assert text.type == "text" and text.text == "Let me check Paris."
    assert call.type == "tool_use" and call.name == "get_weather" and call.input == {"city": "Pa"}
    llms: list[LlmClient] = [SimLlmClient(POLICY), sdk_llm(host.base_url, max_retries=0)]
    for llm in llms:
        error, _ = await failure(llm, stream=False)
        assert isinstance(error, LlmServerError) and error.retryable, error
        assert "no stop reason" in str(error)
        streamed = await answer(llm, True)  # streams are not affected
        assert streamed.stop_reason == "tool_use"


def test_answer_cut_is_outside_swarm_and_deterministic() -> None:
    spec = next(s for s in FAULTS if s.name == "llm.answer_cut")
    assert spec.swarm_range == (0.0, 0.0) and dict(spec.params) == {}
    runs = [
        kelpie_dst.run(_cut_answers, seed=7, faults=[Fault("llm.answer_cut", 0.5)]) for _ in "ab"
    ]
    assert runs[0].ok and runs[0].faults_fired.get("llm.answer_cut", 0) >= 2
    assert runs[0].trace_hash == runs[1].trace_hash


async def _cut_answers() -> None:
    llm = SimLlmClient(POLICY)
    for _ in range(12):
        try:
            await answer(llm, False)
        except LlmServerError:
            pass


@pytest.mark.dst(seeds=SEEDS, faults=[fault("llm.max_tokens")])
async def test_max_tokens(dst: kelpie_dst.Simulation) -> None:
    llms: list[LlmClient] = [SimLlmClient(POLICY), await sdk(dst)]
    for llm in llms:
        for stream in (False, True):
            response = await answer(llm, stream)
            assert response.stop_reason == "max_tokens"
            last = response.content[-1]
            assert last == response.tool_calls[-1] and last.input is None  # cut mid-call
            assert '{"city":"Paris"}'.startswith(last.arguments)
        text = await answer(llm, dst.seed % 2 == 1, "hello")
        assert text.stop_reason == "max_tokens" and text.text and not text.tool_calls
