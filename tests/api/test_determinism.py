"""Determinism: the app inside a simulation (AgentService on sim ports, the simulated KV and
SimLlmClient), driven through httpx's ASGITransport, gives the same trace hash for the same
seed, in this process and in a fresh one with another hash seed."""

from __future__ import annotations

import json

import kelpie_dst

from .harness import AGENT, STRICT, api, sse_frames


async def scenario() -> list[str]:
    """Create an agent, talk to it (JSON, token stream, async), page its history, use its
    memory; every answer goes into the trace."""
    seen: list[str] = []
    async with api() as a:
        c = a.client
        agent = (await c.post("/v1/agents/", json=AGENT)).json()["id"]
        for text in ("Hi", "My name is Ada", "What is my name?"):
            reply = await c.post(f"/v1/agents/{agent}/messages", json={"input": text})
            seen.append(json.dumps(reply.json()["messages"], sort_keys=True))
        streamed = await c.post(
            f"/v1/agents/{agent}/messages/stream", json={"input": "Tell me", "stream_tokens": True}
        )
        seen.append(json.dumps(sse_frames(streamed.text), sort_keys=True))
        await c.post(f"/v1/agents/{agent}/messages/async", json={"input": "later"})
        await c.post(f"/v1/agents/{agent}/archival-memory", json={"text": "otters"})
        found = await c.get(f"/v1/agents/{agent}/archival-memory/search", params={"query": "o"})
        seen.append(found.text)
        page = await c.get(f"/v1/agents/{agent}/messages", params={"limit": 5, "order": "asc"})
        seen.append(page.text)
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


def test_same_seed_same_trace_hash_in_process_and_in_a_fresh_one() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1, 2), runs=2, vary_hashseed=True, **STRICT)
    a = kelpie_dst.run(scenario, seed=1, **STRICT)
    b = kelpie_dst.run(scenario, seed=2, **STRICT)
    assert a.ok and b.ok, (a.failure, b.failure)
    assert a.trace_hash != b.trace_hash
