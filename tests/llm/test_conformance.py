"""The LLM conformance suite against SimLlmClient, against the real SDK on the simulated API
host, outside a simulation, and (only with ANTHROPIC_API_KEY set) against the real API."""

from __future__ import annotations

import os

import pytest
import trio

import kelpie_dst
from kelpie_agent.llm import AnthropicLlm, LlmRequest, Message
from kelpie_agent.llm.testing import (
    ASK_WEATHER,
    CHECKS,
    CONFORMANCE_SCRIPT,
    WEATHER,
    check_llm_conformance,
    run_check,
)
from kelpie_dst.shims.llm import LlmTiming, SimLlmClient, policy_from_dict, start_anthropic_host

from .workloads import sdk_llm

SEEDS = 100
POLICY = policy_from_dict(CONFORMANCE_SCRIPT)


@pytest.mark.dst(seeds=SEEDS)
async def test_sim_client_conforms(dst: kelpie_dst.Simulation) -> None:
    start = trio.current_time()
    await check_llm_conformance(SimLlmClient(POLICY))
    assert trio.current_time() > start  # answers take virtual time


@pytest.mark.dst(seeds=SEEDS)
async def test_anthropic_sdk_on_the_simulated_host_conforms(dst: kelpie_dst.Simulation) -> None:
    host = await start_anthropic_host(dst, POLICY)
    async with sdk_llm(host.base_url) as llm:
        await check_llm_conformance(llm)
    assert set(host.statuses) == {200, 400}


@pytest.mark.trio
@pytest.mark.parametrize("name", list(CHECKS))
async def test_sim_client_conforms_outside_a_simulation(name: str) -> None:
    await run_check(name, SimLlmClient(POLICY, timing=LlmTiming.instant()))


def test_sim_client_is_deterministic_per_seed() -> None:
    async def main() -> tuple[str, ...]:
        llm = SimLlmClient(POLICY)
        responses = [await llm.complete(_weather_request()) for _ in range(3)]
        return tuple(r.id + r.tool_calls[0].id for r in responses)

    first, again, other = (kelpie_dst.run(main, seed=s) for s in (5, 5, 6))
    assert first.trace_hash == again.trace_hash and first.value == again.value
    assert first.value != other.value  # ids come from the seed


def _weather_request() -> LlmRequest:
    return LlmRequest("m", [Message.user(ASK_WEATHER)], tools=[WEATHER])


LIVE_KEY = os.environ.get("ANTHROPIC_API_KEY")


@pytest.mark.skipif(
    not LIVE_KEY,
    reason="live Anthropic API smoke test: set ANTHROPIC_API_KEY (and optionally "
    "KELPIE_LIVE_MODEL) to run it against the real API",
)
@pytest.mark.trio
async def test_live_anthropic_api_conforms() -> None:
    model = os.environ.get("KELPIE_LIVE_MODEL", "claude-haiku-4-5")
    async with AnthropicLlm(max_retries=4, timeout=120.0) as llm:
        await check_llm_conformance(llm, model)
