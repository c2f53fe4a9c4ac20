"""The mcp.* faults, each over 100 seeds, and determinism of MCP runs."""

from __future__ import annotations

import pytest

import kelpie_dst
from kelpie_dst import Fault

from . import workloads


@pytest.mark.dst(seeds=100, faults=["mcp.server_crash=0.15"], guards="strict")
async def test_server_crash(dst: kelpie_dst.Simulation) -> None:
    counts = await workloads.crashes(dst)
    assert counts["ok"] + counts["failed"] == 30
    assert counts["crashes"] == dst.faults.fired["mcp.server_crash"]
    assert (counts["failed"] > 0) == (counts["crashes"] > 0)
    assert counts["starts"] >= 1 + counts["crashes"]  # each crash needed a new process


@pytest.mark.dst(seeds=100, faults=["mcp.slow_start=0.5"], guards="strict")
async def test_slow_start(dst: kelpie_dst.Simulation) -> None:
    counts = await workloads.slow_starts(dst)
    assert counts["timeouts"] == dst.faults.fired["mcp.slow_start"]
    assert counts["starts"] == counts["timeouts"] + 1


@pytest.mark.dst(seeds=100, faults=["mcp.tool_timeout=0.3"], guards="strict")
async def test_tool_timeout(dst: kelpie_dst.Simulation) -> None:
    counts = await workloads.tool_timeouts(dst)
    assert counts["timeouts"] == dst.faults.fired["mcp.tool_timeout"]
    assert counts["starts"] == 1  # a timeout never costs the connection
    assert counts["in_flight"] == 0  # the server dropped every hung request when told


@pytest.mark.dst(seeds=50, faults=["mcp.reply_lost=0.3"], guards="strict")
async def test_reply_lost(dst: kelpie_dst.Simulation) -> None:
    counts = await workloads.lost_replies(dst)
    assert counts["timeouts"] == dst.faults.fired["mcp.reply_lost"]
    assert counts["effects"] == 20  # every call ran, answered or not
    assert counts["starts"] == 1 and counts["in_flight"] == 0


@pytest.mark.dst(seeds=50, faults=["mcp.effect_crash=0.2"], guards="strict")
async def test_a_call_the_server_died_holding_may_have_run(dst: kelpie_dst.Simulation) -> None:
    counts = await workloads.effect_crashes(dst)
    fired = dst.faults.fired["mcp.effect_crash"]
    assert counts["lost"] == counts["lost_ran"] == fired  # each ran, then the server died
    assert counts["effects"] == 20  # every call ran once: none was resent
    assert counts["starts"] == 1 + fired


def test_the_effect_crash_fires_and_is_outside_swarm() -> None:
    spec = kelpie_dst.fault_types()["mcp.effect_crash"]
    assert spec.swarm_range == (0.0, 0.0)  # added without moving any swarm profile
    fired = 0
    for seed in range(5):
        result = kelpie_dst.run(
            workloads.effect_crashes, seed=seed, faults=["mcp.effect_crash=0.2"]
        )
        assert result.failure is None, result.failure
        fired += result.faults_fired.get("mcp.effect_crash", 0)
    assert fired > 0


@pytest.mark.dst(seeds=30, faults=["mcp.list_timeout=0.3"], guards="strict")
async def test_list_timeout(dst: kelpie_dst.Simulation) -> None:
    counts = await workloads.list_timeouts(dst)
    assert counts["timeouts"] == counts["hangs"]  # each hung listing is a timeout, no stale list
    assert counts["in_flight"] == 0  # the server dropped every hung listing when told


@pytest.mark.dst(seeds=100, faults=workloads.ALL_FAULTS, guards="strict")
async def test_every_fault_at_once_a_retrying_caller_finishes(dst: kelpie_dst.Simulation) -> None:
    counts = await workloads.chaos(dst)
    fired = dst.faults.fired
    assert counts["retries"] >= fired["mcp.tool_timeout"]
    assert counts["starts"] == 1 + fired["mcp.server_crash"] + fired["mcp.slow_start"]


def test_the_faults_really_fire_across_seeds() -> None:
    fired = {"mcp.server_crash": 0, "mcp.slow_start": 0, "mcp.tool_timeout": 0}
    for seed in range(10):
        result = kelpie_dst.run(workloads.chaos, seed=seed, faults=workloads.ALL_FAULTS)
        assert result.failure is None, result.failure
        for name in fired:
            fired[name] += result.faults_fired.get(name, 0)
    assert all(count > 0 for count in fired.values()), fired


def test_a_slow_start_shorter_than_the_timeout_only_costs_time() -> None:
    async def main(sim: kelpie_dst.Simulation) -> float:
        _, client = workloads.make()
        async with client:
            start = sim.now()
            await client.connect(workloads.NAME)
            return sim.now() - start

    slow = Fault("mcp.slow_start", 1.0, params=(("delay", 3.0),))
    result = kelpie_dst.run(main, seed=1, faults=[slow])
    assert result.failure is None, result.failure
    assert result.value == pytest.approx(3.0 + 0.1)  # delay + the server's start_latency
    assert result.faults_fired == {"mcp.slow_start": 1}


def test_faults_outside_their_window_never_fire() -> None:
    late = Fault("mcp.server_crash", 1.0, start=1000.0)
    result = kelpie_dst.run(workloads.crashes, seed=4, faults=[late])
    assert result.failure is None, result.failure
    assert result.value == {"ok": 30, "failed": 0, "crashes": 0, "starts": 1}


def test_same_seed_same_trace() -> None:
    kelpie_dst.assert_deterministic(
        workloads.chaos, seeds=range(5), faults=workloads.ALL_FAULTS, vary_hashseed=True
    )


def test_effect_crashes_same_seed_same_trace() -> None:
    kelpie_dst.assert_deterministic(
        workloads.effect_crashes, seeds=range(3), faults=["mcp.effect_crash=0.2"], runs=2
    )
