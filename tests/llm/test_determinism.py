"""Same seed, same run: SimLLM behind both plugs, under every llm fault (and some network
faults), in this process and in a fresh one."""

from __future__ import annotations

import kelpie_dst

from . import workloads


def test_adversarial_chaos_is_deterministic() -> None:
    kelpie_dst.assert_deterministic(
        workloads.adversarial_chaos, seeds=range(2), faults=workloads.CHAOS_FAULTS
    )


def test_adversarial_chaos_only_ends_in_answers_or_llm_errors() -> None:
    seen: set[str] = set()
    for seed in range(20):
        result = kelpie_dst.run(
            workloads.adversarial_chaos, seed=seed, faults=workloads.CHAOS_FAULTS
        )
        assert result.ok, result.failure and result.failure.describe()
        assert sum(result.value.values()) == 12
        seen |= set(result.value)
    assert {"tool_use", "end_turn", "max_tokens"} <= seen
    assert seen & {"LlmTimeoutError", "LlmRateLimitedError", "LlmOverloadedError"}


def test_different_seeds_differ() -> None:
    hashes = {
        kelpie_dst.run(
            workloads.adversarial_chaos, seed=s, faults=workloads.CHAOS_FAULTS
        ).trace_hash
        for s in range(5)
    }
    assert len(hashes) == 5
