"""Issue #4's acceptance for the LLM: the real anthropic SDK, through AnthropicLlm, completes a
tool-use conversation and a streamed one against the simulated API host, inside
``kelpie_dst.run``, under 429, 529 and stream_cut faults; deterministically; with the SDK's
own retries sleeping in virtual time."""

from __future__ import annotations

import time
from collections import Counter

import kelpie_dst
from kelpie_dst import Fault

from . import workloads
from .workloads import POLICY, sdk_llm, weather_request

SEEDS = 100
FAULTS = ["llm.rate_limited=0.3", "llm.overloaded=0.3", "llm.stream_cut=0.3"]
EXPECTED = {"whole": "It is sunny there.", "streamed": "It is snowing there."}


def test_sdk_conversations_under_429_529_and_stream_cut() -> None:
    fired: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    retried = 0
    for seed in range(SEEDS):
        result = kelpie_dst.run(workloads.sdk_conversations, seed=seed, faults=FAULTS)
        assert result.ok, result.failure and result.failure.describe()
        value = result.value
        assert {k: value[k] for k in EXPECTED} == EXPECTED
        fired.update(result.faults_fired)
        statuses.update(value["statuses"])
        retried += value["retries"] > 0
    assert set(fired) == {"llm.rate_limited", "llm.overloaded", "llm.stream_cut"}
    assert statuses[429] > 0 and statuses[529] > 0 and statuses[200] >= 4 * SEEDS
    assert retried > 0  # stream cuts (and exhausted SDK retries) reached our own retry loop


def test_direct_client_gives_the_same_answers_under_the_same_faults() -> None:
    for seed in range(SEEDS):
        result = kelpie_dst.run(workloads.direct_conversations, seed=seed, faults=FAULTS)
        assert result.ok, result.failure and result.failure.describe()
        assert {k: result.value[k] for k in EXPECTED} == EXPECTED


def test_sdk_conversations_are_deterministic_across_processes() -> None:
    # Two runs in this process and one in a fresh process per seed, same trace hash.
    kelpie_dst.assert_deterministic(workloads.sdk_conversations, seeds=range(3), faults=FAULTS)


async def _rate_limited_once(sim: kelpie_dst.Simulation) -> tuple[float, int]:
    from kelpie_dst.shims.llm import start_anthropic_host

    host = await start_anthropic_host(sim, POLICY)
    start = sim.now()
    async with sdk_llm(host.base_url, max_retries=2) as llm:
        response = await llm.complete(weather_request("weather in Paris"))
    assert response.tool_calls[0].input == {"city": "Paris"}
    return sim.now() - start, host.statuses[429]


def test_sdk_retries_sleep_in_virtual_time() -> None:
    # 429 with retry-after: 30 for the first second, then no faults: the SDK's one retry
    # waits 30 virtual seconds.
    limit = Fault("llm.rate_limited", 1.0, start=0.0, end=1.0, params=(("retry_after", 30.0),))
    wall = time.monotonic()
    result = kelpie_dst.run(_rate_limited_once, seed=4, faults=[limit])
    wall = time.monotonic() - wall
    assert result.ok, result.failure and result.failure.describe()
    virtual, limited = result.value
    assert limited == 1 and virtual >= 30.0
    assert wall < 30.0  # a sanity bound only: the wait was not a real sleep
