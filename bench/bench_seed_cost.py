"""Per-seed CPU of the agent scenarios, against a bare-trio reference workload, in one process.

    .venv/bin/python bench/bench_seed_cost.py [--seeds 10] [--first 0] [--rounds 2]
                                              [--scenario agent_chaos] [--hashes]

The reference is 200 trio tasks doing 2,000 ``trio.sleep(0)`` each under plain ``trio.run``
(issue #15). Each round runs the reference, then every seed over HTTP (the scenario as shipped,
``via=http``) and again with ``workload.params.via=direct``; a warm-up seed of each goes first,
so imports and one-time set-up are not counted. CPU is ``time.process_time`` (this process
only), and each figure is the minimum over the rounds (per seed, then summed): on a shared
machine other processes only ever add to a measurement, so the minimum is the closest to an
idle machine's figure. The load average is printed beside the figures. Targets (#15): HTTP
per seed at most 0.5x the reference, HTTP at most 1.5x direct. ``--hashes`` prints each seed's
trace hash (they must not change with speed work).
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import trio

from kelpie_dst.scenario import Scenario, load_scenario, run_scenario

TASKS = 200
SLEEPS = 2_000


async def _reference() -> None:
    async def task() -> None:
        for _ in range(SLEEPS):
            await trio.sleep(0)  # noqa: ASYNC115  (the reference the issue defines)

    async with trio.open_nursery() as nursery:
        for _ in range(TASKS):
            nursery.start_soon(task)


def reference_cpu() -> float:
    gc.collect()
    start = time.process_time()
    trio.run(_reference)
    return time.process_time() - start


def seed_cpu(scenario: Scenario, via: str, seed: int, hashes: dict[tuple[str, int], str]) -> float:
    gc.collect()
    start = time.process_time()
    run = run_scenario(scenario, seed)
    cpu = time.process_time() - start
    previous = hashes.setdefault((via, seed), run.result.trace_hash)
    if previous != run.result.trace_hash:
        raise SystemExit(f"{via} seed {seed}: hash {run.result.trace_hash} != {previous}")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="agent_chaos")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hashes", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    seeds = range(args.first, args.first + args.seeds)
    hashes: dict[tuple[str, int], str] = {}
    scenarios = {
        via: load_scenario(args.scenario, (f"workload.params.via={via}",))
        for via in ("http", "direct")
    }
    for via, loaded in scenarios.items():  # warm-up: imports, caches, first-request set-up
        seed_cpu(loaded, via, args.first, {})
    load_before = os.getloadavg()[0]
    refs: list[float] = []
    cpu: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        refs.append(reference_cpu())
        for seed in seeds:
            for via, loaded in scenarios.items():
                cpu.setdefault((via, seed), []).append(seed_cpu(loaded, via, seed, hashes))
    ref = min(refs)
    h = sum(min(cpu["http", s]) for s in seeds) / len(seeds)
    d = sum(min(cpu["direct", s]) for s in seeds) / len(seeds)
    spread = max(refs) / ref
    print(
        f"{args.scenario}, seeds {seeds.start}-{seeds.stop - 1}, min of {args.rounds} rounds; "
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; "
        f"reference spread {spread:.2f}x"
    )
    print(f"reference ({TASKS} tasks x {SLEEPS:,} sleep(0)): {ref * 1000:7.1f} ms CPU")
    print(f"per seed, via=http:   {h * 1000:7.1f} ms CPU  {h / ref:5.2f}x reference")
    print(f"per seed, via=direct: {d * 1000:7.1f} ms CPU  {d / ref:5.2f}x reference")
    print(f"http / direct: {h / d:5.2f}x")
    if args.hashes:
        for (via, seed), digest in sorted(hashes.items()):
            print(f"  {via:<6} seed {seed:>4}: {digest}")


if __name__ == "__main__":
    main()
