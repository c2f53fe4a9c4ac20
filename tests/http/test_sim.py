"""The same server inside kelpie_dst: a FastAPI (and a raw ASGI) app on a simulated node, an
httpx client on another, under network delay, resets, partitions and clogs."""

from __future__ import annotations

import pytest

import kelpie_dst

from . import workload

# strict guards: a wall-clock read, entropy or a thread anywhere in the server, Starlette or
# FastAPI fails the run; only httpx's cookie jar (the client) reads time.time for expiry.
STRICT = {"guards": "strict", "guard_allow": ("http.cookiejar",)}
FAULTS = [
    "network.delay=0.05",
    "network.reset=0.01",
    "network.partition=0.3",
    "network.clog=0.3",
]


@pytest.mark.dst(seeds=10, faults=FAULTS, max_time=900, **STRICT)
async def test_fastapi_app_under_network_faults(dst: kelpie_dst.Simulation) -> None:
    summary = await workload.main(dst, "fastapi")
    assert summary["complete"] >= 3  # the liveness phase alone completes 3


@pytest.mark.dst(seeds=10, faults=FAULTS, max_time=900, **STRICT)
async def test_raw_asgi_app_under_network_faults(dst: kelpie_dst.Simulation) -> None:
    await workload.main(dst, "raw")


def test_faults_fire_and_requests_fail_and_recover() -> None:
    """The fault mix really bites: over a few seeds, requests fail and streams are cut."""
    results = [kelpie_dst.run(workload.main_fastapi, seed=s, faults=FAULTS) for s in range(10)]
    assert all(r.ok for r in results), [r.failure for r in results if r.failure][:1]
    fired: set[str] = set()
    for result in results:
        fired |= set(result.faults_fired)
    assert {"network.reset", "network.partition", "network.clog", "network.delay"} <= fired
    values = [r.value for r in results]
    assert sum(v["failed"] for v in values) > 0, values
    assert all(v["complete"] >= 3 for v in values), values


def test_clean_network_serves_everything() -> None:
    result = kelpie_dst.run(workload.main_fastapi, seed=3, **STRICT)
    assert result.ok, result.failure
    assert result.value == {
        "complete": 24 + 2,  # and the abandoned stream
        "failed": 0,
        "partial_streams": 0,
        "timeouts": 0,
        "server_requests": 27,
    }


def test_same_seed_same_trace_in_process_and_in_a_fresh_process() -> None:
    kelpie_dst.assert_deterministic(workload.main_fastapi, seeds=range(2), faults=FAULTS)
    kelpie_dst.assert_deterministic(workload.main_raw, seeds=[5], faults=FAULTS, runs=2)


def test_slowloris_in_virtual_time() -> None:
    result = kelpie_dst.run(workload.slowloris, seed=1, **STRICT)
    assert result.ok, result.failure
    elapsed, received = result.value
    assert received.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"request head took over 5.0s" in received
    assert 5.0 <= elapsed < 6.5  # header_timeout of virtual seconds; no real time spent
    assert result.wall_seconds < 5


def test_server_node_crash_and_restart() -> None:
    result = kelpie_dst.run(workload.crash_and_restart, seed=2, **STRICT)
    assert result.ok, result.failure
    outcomes = result.value
    assert outcomes[0].startswith("cut: ")
    assert outcomes[-1] == "health 200"
    assert any(o.startswith("down: ") for o in outcomes)  # refused until it restarted
