"""Agent turns per second of wall time in simulation (AgentActor + SimLlmClient + SimKV), and
the ratio of virtual to wall time.

Run with ``.venv/bin/python bench/bench_agent.py`` (``--agents N --turns M --seeds S``). Each
turn is one SendMessage to a memgpt agent driven by HelpfulPolicy: a mix of plain replies,
core_memory_append + heartbeat + send_message, archival inserts and searches, so most turns
take 2 LLM steps and 3-5 storage transactions. The LLM has its default virtual latency
(0.2-0.6 s to first token, 80 tokens/s), which is what the virtual/wall ratio measures against.
A second figure runs the same workload with ``stream_tokens`` and a consumer.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentActor,
    AgentEnv,
    BlockCreate,
    CreateAgent,
    InputMessage,
    SendMessage,
    StreamEvent,
    TurnResult,
    builtin_id,
    default_tool_names,
)
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports

TEXTS = (
    "Hello!",
    "My name is Ada",
    "remember that otters hold hands while they sleep",
    "what is my name?",
    "do you remember otters?",
    "How are you today?",
)


class _Context:
    def __init__(self, agent_id: str, kv: Any, ports: Any) -> None:
        self.actor_id = type("Id", (), {"kind": "agent", "id": agent_id})()
        self.kv, self.ports, self.node_id = kv, ports, "main"

    def transaction(self) -> Any:
        return self.kv.transaction()


def workload(agents: int, turns: int, stream: bool) -> Any:
    async def main(sim: kelpie_dst.Simulation) -> dict[str, int]:
        node = sim.current_node()
        assert node is not None
        kv = open_kv(node)
        ports = sim_ports(node)
        env = AgentEnv(llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming()))
        counts = {"turns": 0, "steps": 0, "events": 0}

        async def one(index: int) -> None:
            agent_id = ports.ids.new("agent")
            actor = AgentActor(env)
            await actor.activate(_Context(agent_id, kv, ports))
            tools = tuple(builtin_id(n) for n in default_tool_names("memgpt_agent"))
            await actor.handle(
                CreateAgent(
                    name=f"bench-{index}",
                    agent_type="memgpt_agent",
                    memory_blocks=(BlockCreate("human", ""),),
                    tool_ids=tools,
                )
            )
            for turn in range(turns):
                text = TEXTS[(index + turn) % len(TEXTS)]
                send, receive = (
                    trio.open_memory_channel[StreamEvent](1000) if stream else (None, None)
                )
                async with trio.open_nursery() as nursery:
                    if receive is not None:
                        nursery.start_soon(_drain, receive, counts)
                    result = await actor.handle(
                        SendMessage(
                            (InputMessage("user", text),), stream=send, stream_tokens=stream
                        )
                    )
                assert isinstance(result, TurnResult) and result.stop_reason == "end_turn", result
                counts["turns"] += 1
                counts["steps"] += result.usage.step_count

        async with trio.open_nursery() as nursery:
            for index in range(agents):
                nursery.start_soon(one, index)
        return counts

    return main


async def _drain(receive: trio.MemoryReceiveChannel[StreamEvent], counts: dict[str, int]) -> None:
    async with receive:
        async for _ in receive:
            counts["events"] += 1


def measure(agents: int, turns: int, seeds: int, stream: bool) -> None:
    total: dict[str, float] = {"turns": 0, "steps": 0, "events": 0, "virtual": 0.0}
    wall = time.perf_counter()
    for seed in range(seeds):
        result = kelpie_dst.run(workload(agents, turns, stream), seed=seed, guards="strict")
        assert result.ok, result.failure and result.failure.describe()
        for key in ("turns", "steps", "events"):
            total[key] += result.value[key]
        total["virtual"] += result.virtual_time
    wall = time.perf_counter() - wall
    label = "stream_tokens" if stream else "whole answers"
    print(
        f"{label:>14}: {total['turns'] / wall:8.1f} turns/s  {total['steps'] / wall:8.1f} "
        f"LLM steps/s  virtual/wall {total['virtual'] / wall:6.1f}x  "
        f"({int(total['turns'])} turns, {int(total['steps'])} steps, "
        f"{int(total['events'])} events, {wall:.2f} s wall, {total['virtual']:.1f} s virtual)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    print(
        f"{args.agents} concurrent agents x {args.turns} turns x {args.seeds} seeds, strict guards"
    )
    measure(args.agents, args.turns, args.seeds, stream=False)
    measure(args.agents, args.turns, args.seeds, stream=True)


if __name__ == "__main__":
    main()
