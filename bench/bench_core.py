"""Checkpoints/s and timer wakeups/s: kelpie_dst.run against bare trio.run with MockClock.

The same workload runs under both, interleaved and repeated, and the script prints the median
rates and the overhead ratio (bare / simulated; 1.0 means no overhead). The issue's target is at
most 1.3x. Usage: ``python bench/bench_core.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable

import trio
import trio.lowlevel
import trio.testing

import kelpie_dst

TASKS = 10
CHECKPOINTS = 20_000  # per task
WAKEUPS = 2_000  # per task


async def checkpoints() -> None:
    async def task() -> None:
        for _ in range(CHECKPOINTS):
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        for _ in range(TASKS):
            nursery.start_soon(task)


async def wakeups() -> None:
    async def task(i: int) -> None:
        for n in range(WAKEUPS):
            await trio.sleep(0.001 * (1 + (i * 7 + n) % 13))

    async with trio.open_nursery() as nursery:
        for i in range(TASKS):
            nursery.start_soon(task, i)


def bare(workload: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    trio.run(workload, clock=trio.testing.MockClock(autojump_threshold=0))
    return time.perf_counter() - start


def simulated(workload: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    result = kelpie_dst.run(workload, seed=1)
    elapsed = time.perf_counter() - start
    assert result.ok, result.failure
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{TASKS} tasks; median of {args.repeat} interleaved runs each")
    print(f"{'workload':<12} {'bare trio /s':>14} {'kelpie_dst /s':>14} {'overhead':>9}")
    for name, workload, ops in (
        ("checkpoints", checkpoints, TASKS * CHECKPOINTS),
        ("wakeups", wakeups, TASKS * WAKEUPS),
    ):
        bare_times, sim_times = [], []
        for _ in range(args.repeat):
            bare_times.append(bare(workload))
            sim_times.append(simulated(workload))
        b, s = statistics.median(bare_times), statistics.median(sim_times)
        print(f"{name:<12} {ops / b:>14,.0f} {ops / s:>14,.0f} {s / b:>8.2f}x")


if __name__ == "__main__":
    main()
