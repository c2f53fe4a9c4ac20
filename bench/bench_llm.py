"""LLM calls per second (wall clock): SimLlmClient vs the real anthropic SDK (AnthropicLlm)
through the simulated API host, whole answers and streams, inside one ``kelpie_dst.run``.

Run with ``.venv/bin/python bench/bench_llm.py`` (``--calls N``; ``--acceptance`` also prints
the figures of issue #4's LLM acceptance: the SDK under 429/529/stream_cut over 100 seeds).
Each call is a short tool-use answer (a sentence and one tool call); latency is virtual, so
the figures measure the simulator's and the SDK's overhead, not a model.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

import trio

import kelpie_dst
from kelpie_agent.llm import AnthropicLlm, LlmClient, LlmRequest, Message, Tool
from kelpie_dst.shims.llm import SimLlmClient, policy_from_dict, start_anthropic_host

WEATHER = Tool(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
POLICY = policy_from_dict(
    {
        "mode": "scripted",
        "rules": [
            {
                "when": {"user_regex": r"weather in (?P<city>\w+)"},
                "text": "Let me check the weather in {city} for you.",
                "tool_calls": [{"name": "get_weather", "input": {"city": "{city}"}}],
            }
        ],
    }
)
REQUEST = LlmRequest("claude-sim", [Message.user("weather in Paris")], tools=[WEATHER])


async def calls(llm: LlmClient, n: int, stream: bool) -> float:
    start = trio.current_time()
    for _ in range(n):
        response = await (llm.stream(REQUEST).collect() if stream else llm.complete(REQUEST))
        assert response.tool_calls[0].input == {"city": "Paris"}
    return trio.current_time() - start


def measure(kind: str, stream: bool, n: int) -> tuple[float, float]:
    async def main(sim: kelpie_dst.Simulation) -> float:
        if kind == "SimLlmClient":
            return await calls(SimLlmClient(POLICY), n, stream)
        host = await start_anthropic_host(sim, POLICY)
        async with AnthropicLlm(base_url=host.base_url, api_key="sim") as llm:
            return await calls(llm, n, stream)

    wall = time.perf_counter()
    result = kelpie_dst.run(main, seed=1)
    wall = time.perf_counter() - wall
    assert result.ok, result.failure
    return n / wall, result.value / n


def acceptance() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.llm
    from tests.llm import workloads

    faults = ["llm.rate_limited=0.3", "llm.overloaded=0.3", "llm.stream_cut=0.3"]
    fired: collections.Counter[str] = collections.Counter()
    statuses: collections.Counter[int] = collections.Counter()
    retries = virtual = 0.0
    wall = time.perf_counter()
    for seed in range(100):
        result = kelpie_dst.run(workloads.sdk_conversations, seed=seed, faults=faults)
        assert result.ok, result.failure
        value: dict[str, Any] = result.value
        fired.update(result.faults_fired)
        statuses.update(value["statuses"])
        retries += value["retries"]
        virtual += result.virtual_time
    wall = time.perf_counter() - wall
    print(f"acceptance: 100 seeds x (tool-use conversation + streamed one), faults {faults}")
    print(f"  all 100 completed; faults fired {dict(sorted(fired.items()))}")
    print(f"  host answers by status {dict(sorted(statuses.items()))}")
    print(f"  our own retries (after the SDK's): {retries:.0f}")
    print(f"  virtual time {virtual:.1f} s total, wall {wall:.2f} s total")
    limit = kelpie_dst.Fault("llm.rate_limited", 1.0, end=1.0, params=(("retry_after", 30.0),))

    async def once(sim: kelpie_dst.Simulation) -> float:
        host = await start_anthropic_host(sim, POLICY)
        async with AnthropicLlm(base_url=host.base_url, api_key="sim") as llm:
            return await calls(llm, 1, stream=False)

    wall = time.perf_counter()
    result = kelpie_dst.run(once, seed=4, faults=[limit])
    wall = time.perf_counter() - wall
    print(f"  429 retry-after 30: call took {result.value:.3f} virtual s, {wall:.3f} wall s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--acceptance", action="store_true")
    args = parser.parse_args()
    measure("SimLlmClient", False, 10)  # warm up imports
    measure("AnthropicLlm", True, 2)
    print(f"{'client':<36} {'calls/s (wall)':>15} {'virtual s/call':>15}")
    for kind in ("SimLlmClient", "AnthropicLlm"):
        for stream in (False, True):
            rate, virtual = measure(kind, stream, args.calls)
            label = f"{kind}{' via simulated host' if kind == 'AnthropicLlm' else ''}"
            label += " (stream)" if stream else " (whole)"
            print(f"{label:<36} {rate:>15.0f} {virtual:>15.3f}")
    if args.acceptance:
        acceptance()


if __name__ == "__main__":
    main()
