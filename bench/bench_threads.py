"""What simulated threads cost: a switch, a to_thread call, preemption tracing, a racy seed.

* **switch**: two simulated threads hand a token back and forth through two
  ``threading.Event`` pairs (each hand-over is one thread parking and another waking, through
  the scheduler), against the same ping-pong between two real threads outside any simulation,
  and against the floor of a bare handoff through two raw locks. Printed per switch, with
  preemption points off (they would add switches of their own).
* **to_thread**: ``await trio.to_thread.run_sync(noop)`` in a simulation, against plain
  ``trio.run`` with real worker threads.
* **preemption**: a pure-Python loop in a simulated thread with preemption points on and off,
  and the same loop on the trio loop (never traced): the tracing overhead, and how many
  preemption points the loop met.
* **canary**: ms per seed of ``kelpie_dst.examples.threads:lost_update``.
* **agent** (``--agent``): wall seconds per seed of agent_chaos (its clients call
  ``to_thread`` through letta_client); with ``--baseline DIR`` (a checkout of main, e.g.
  ``git archive main | tar -x -C /tmp/main``) the same seeds run there too, side by side.

Every figure is the median of ``--repeat`` interleaved rounds, as wall time and as the CPU time
of the whole process (all threads): on a shared machine the wall time also counts waiting for
a core, the CPU time does not. Usage:
``python bench/bench_threads.py [--repeat 5] [--agent [--baseline DIR]]``.
"""

from __future__ import annotations

import _thread
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import trio

import kelpie_dst
from kelpie_dst.examples import threads as racy

SWITCHES = 2_000  # hand-overs per round
CALLS = 1_000  # to_thread calls per round
LOOP = 100_000  # iterations of the traced loop


def ping_pong(rounds: int) -> None:
    """Two threads hand a token back and forth ``rounds`` times (2 * rounds switches)."""
    ping, pong = threading.Event(), threading.Event()

    def player(mine: threading.Event, theirs: threading.Event, first: bool) -> None:
        for _ in range(rounds):
            if not first:
                mine.wait()
                mine.clear()
            theirs.set()
            if first:
                mine.wait()
                mine.clear()

    threads = [
        threading.Thread(target=player, args=(ping, pong, True)),
        threading.Thread(target=player, args=(pong, ping, False)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


async def simulated_ping_pong() -> None:
    ping_pong(SWITCHES // 2)


def raw_locks(rounds: int) -> None:
    go, back = _thread.allocate_lock(), _thread.allocate_lock()
    go.acquire()
    back.acquire()

    def other() -> None:
        for _ in range(rounds):
            go.acquire()
            back.release()

    _thread.start_new_thread(other, ())
    for _ in range(rounds):
        go.release()
        back.acquire()


async def to_thread_calls() -> None:
    for _ in range(CALLS):
        await trio.to_thread.run_sync(int)


def busy() -> int:
    total = 0
    for i in range(LOOP):
        total += i % 7
        total ^= i
    return total


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process, every thread included). On a shared
    machine the wall time includes waiting for a core; the CPU time does not."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def sim(main: Callable[..., object], **options: object) -> Callable[[], object]:
    def go() -> object:
        result = kelpie_dst.run(main, seed=1, **options)  # type: ignore[arg-type]
        assert result.ok, result.failure
        return result

    return go


def threaded_loop(preemption: bool) -> Callable[[], object]:
    async def main() -> None:
        await trio.to_thread.run_sync(busy)

    return sim(main, preemption=preemption)


def looped() -> Callable[[], object]:
    async def main() -> None:
        busy()

    return sim(main)


def preemption_points() -> int:
    counts: list[int] = []

    async def main(s: kelpie_dst.Simulation) -> None:
        await trio.to_thread.run_sync(busy)
        preemption = s.threads.preemption
        counts.append(preemption.points if preemption is not None else 0)

    kelpie_dst.run(main, seed=1)
    return counts[0]


def canary_seeds(n: int = 50) -> tuple[float, float]:
    wall, cpu = timed(lambda: [kelpie_dst.run(racy.lost_update, seed=s) for s in range(n)])
    return wall / n, cpu / n


AGENT = """
import sys, time
from kelpie_dst.scenario import load_scenario, run_scenario
scenario = load_scenario("agent_chaos")
start, cpu = time.perf_counter(), time.process_time()
for seed in {seeds}:
    run_scenario(scenario, seed)
print((time.perf_counter() - start) / len({seeds}), (time.process_time() - cpu) / len({seeds}))
"""


def agent_seconds(path: str, seeds: list[int]) -> tuple[float, float]:
    env = dict(os.environ, PYTHONHASHSEED="0", KELPIE_DST_NO_REEXEC="1", PYTHONPATH=path)
    proc = subprocess.run(
        [sys.executable, "-c", AGENT.format(seeds=seeds)],
        capture_output=True,
        text=True,
        env=env,
        cwd=path,
        check=True,
    )
    wall, cpu = proc.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--agent", action="store_true", help="also time agent_chaos seeds")
    parser.add_argument("--baseline", help="a checkout of main to time agent_chaos against")
    args = parser.parse_args()
    cases: dict[str, tuple[Callable[[], object], int]] = {
        "switch, simulated threads": (sim(simulated_ping_pong, preemption=False), SWITCHES),
        "switch, real threads": (lambda: ping_pong(SWITCHES // 2), SWITCHES),
        "switch, raw lock handoff": (lambda: raw_locks(SWITCHES // 2), SWITCHES),
        "to_thread call, simulated": (sim(to_thread_calls), CALLS),
        "to_thread call, plain trio": (lambda: trio.run(to_thread_calls), CALLS),
        "loop in a thread, preemption on": (threaded_loop(True), 1),
        "loop in a thread, preemption off": (threaded_loop(False), 1),
        "loop on the trio loop": (looped(), 1),
    }
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, (fn, n) in cases.items():
            wall, cpu = timed(fn)
            rows[name].append((wall / n, cpu / n))
    med = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in rows.items()
    }
    print(f"load average: {os.getloadavg()[0]:.2f}; median of {args.repeat} rounds")
    print(f"{'':34}{'wall':>12}{'CPU':>12}")
    for name, (_fn, n) in cases.items():
        wall, cpu = med[name]
        unit, scale = ("us", 1e6) if n > 1 else ("ms", 1e3)
        print(f"{name:34}{wall * scale:10.1f}{unit}{cpu * scale:10.1f}{unit}")
    points = preemption_points()
    on, off = med["loop in a thread, preemption on"][1], med["loop in a thread, preemption off"][1]
    print(
        f"the loop ({LOOP:,} iterations) met {points} preemption points, each costing "
        f"{(on - off) / points * 1e6:.0f} us of CPU: {on / off:.2f}x the CPU without them"
    )
    wall, cpu = canary_seeds()
    print(f"thread-race canary: {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU per seed")
    if args.agent:
        seeds = [1, 2, 3]
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        mine = agent_seconds(here, seeds)
        line = f"agent_chaos: {mine[0]:.2f} s wall, {mine[1]:.2f} s CPU per seed (seeds {seeds})"
        if args.baseline:
            base = agent_seconds(args.baseline, seeds)
            line += (
                f"; baseline {base[0]:.2f} s wall, {base[1]:.2f} s CPU: "
                f"CPU ratio {mine[1] / base[1]:.2f}"
            )
        print(line)


if __name__ == "__main__":
    main()
