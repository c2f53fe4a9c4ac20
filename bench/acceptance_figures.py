"""Prints the figures quoted in the closing notes of issues #2 and #3.

Re-run it to refresh them: ``python bench/acceptance_figures.py``. Everything here is
deterministic except the wall-clock timings.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time

import kelpie_dst
from kelpie_dst.examples import http, interleave, race


def interleavings() -> None:
    hashes = [kelpie_dst.run(interleave.main, seed=s).trace_hash for s in range(300)]
    print(f"interleave: 300 seeds -> {len(set(hashes))} distinct trace hashes (interleavings)")


def pct_vs_random() -> None:
    def failing(strategy: str, limit: int) -> list[int]:
        runs = (kelpie_dst.run(race.main, seed=s, strategy=strategy) for s in range(limit))
        return [r.seed for r in runs if not r.ok]

    pct = failing("pct", 200)
    uniform = failing("random", 3000)
    print(
        f"race: pct fails on {len(pct)}/200 seeds (first at seed {pct[0]}); "
        f"random fails on {len(uniform)}/3000 seeds "
        f"(first at seed {uniform[0] if uniform else '-'})"
    )


CLI = [sys.executable, "-m", "kelpie_dst"]


def deadlock_wall_time() -> None:
    start = time.perf_counter()
    proc = subprocess.run(
        [*CLI, "run", "--seed", "1", "--entry", "kelpie_dst.examples.deadlock:main"],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    deadlock = __import__("kelpie_dst.examples.deadlock", fromlist=["main"])
    inner = kelpie_dst.run(deadlock.main, seed=1)
    print(
        f"deadlock: CLI exit {proc.returncode} in {elapsed:.2f}s wall (process start included); "
        f"the run itself took {inner.wall_seconds * 1000:.1f} ms"
    )


def network_faults() -> None:
    faults = [
        "network.delay=0.05",
        "network.packet_loss=0.05",
        "network.partition=0.3",
        "network.clog=0.3",
        "network.reset=0.01",
        "network.duplicate=0.05",
        "network.reorder=0.05",
    ]
    fired: collections.Counter[str] = collections.Counter()
    virtual = wall = 0.0
    failures = 0
    for seed in range(200):
        result = kelpie_dst.run(http.main, seed=seed, faults=faults)
        failures += not result.ok
        fired.update(result.faults_fired)
        virtual += result.virtual_time
        wall += result.wall_seconds
    print(
        f"network: 200 seeds of the http workload under all network faults: {failures} failures, "
        f"{virtual:.0f}s virtual in {wall:.1f}s wall ({virtual / wall:.0f}x); "
        f"fired {dict(sorted(fired.items()))}"
    )
    start = time.perf_counter()
    result = kelpie_dst.run(_day_of_sleeps, seed=1)
    print(
        f"network: 24 one-hour sleeps then a TCP exchange: {result.virtual_time:.0f}s virtual in "
        f"{(time.perf_counter() - start) * 1000:.1f} ms wall"
    )


async def _day_of_sleeps(sim: kelpie_dst.Simulation) -> None:
    import trio

    sim.add_node("web", http.web_node)
    for _ in range(24):
        await trio.sleep(3600)
    stream = await trio.open_tcp_stream("web", http.ECHO_PORT)
    await stream.send_all(b"x")
    await stream.receive_some(1)


if __name__ == "__main__":
    interleavings()
    pct_vs_random()
    deadlock_wall_time()
    network_faults()
