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

Every figure is the median of ``--repeat`` interleaved rounds. Usage:
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


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


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


def canary_seeds(n: int = 50) -> float:
    start = time.perf_counter()
    for seed in range(n):
        kelpie_dst.run(racy.lost_update, seed=seed)
    return (time.perf_counter() - start) / n


AGENT = """
import sys, time
from kelpie_dst.scenario import load_scenario, run_scenario
scenario = load_scenario("agent_chaos")
start = time.perf_counter()
for seed in {seeds}:
    run_scenario(scenario, seed)
print((time.perf_counter() - start) / len({seeds}))
"""


def agent_seconds(path: str, seeds: list[int]) -> float:
    env = dict(os.environ, PYTHONHASHSEED="0", KELPIE_DST_NO_REEXEC="1", PYTHONPATH=path)
    proc = subprocess.run(
        [sys.executable, "-c", AGENT.format(seeds=seeds)],
        capture_output=True,
        text=True,
        env=env,
        cwd=path,
        check=True,
    )
    return float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--agent", action="store_true", help="also time agent_chaos seeds")
    parser.add_argument("--baseline", help="a checkout of main to time agent_chaos against")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        pong = sim(simulated_ping_pong, preemption=False)
        rows.setdefault("switch (sim)", []).append(timed(pong) / SWITCHES)
        rows.setdefault("switch (real)", []).append(
            timed(lambda: ping_pong(SWITCHES // 2)) / SWITCHES
        )
        rows.setdefault("switch (raw locks)", []).append(
            timed(lambda: raw_locks(SWITCHES // 2)) / SWITCHES
        )
        rows.setdefault("to_thread (sim)", []).append(timed(sim(to_thread_calls)) / CALLS)
        rows.setdefault("to_thread (trio)", []).append(
            timed(lambda: trio.run(to_thread_calls)) / CALLS
        )
        rows.setdefault("loop in a thread, preemption on", []).append(timed(threaded_loop(True)))
        rows.setdefault("loop in a thread, preemption off", []).append(timed(threaded_loop(False)))
        rows.setdefault("loop on the trio loop", []).append(timed(looped()))
    med = {name: statistics.median(values) for name, values in rows.items()}
    print(f"load average: {os.getloadavg()[0]:.2f} (median of {args.repeat} rounds)")
    print(f"switch, simulated threads:     {med['switch (sim)'] * 1e6:8.1f} us")
    print(f"switch, real threads:          {med['switch (real)'] * 1e6:8.1f} us")
    print(f"switch, raw lock handoff:      {med['switch (raw locks)'] * 1e6:8.1f} us")
    print(f"to_thread call, simulated:     {med['to_thread (sim)'] * 1e6:8.1f} us")
    print(f"to_thread call, plain trio:    {med['to_thread (trio)'] * 1e6:8.1f} us")
    on, off = med["loop in a thread, preemption on"], med["loop in a thread, preemption off"]
    base = med["loop on the trio loop"]
    points = preemption_points()
    print(
        f"{LOOP:,}-iteration loop: {on * 1e3:.1f} ms with preemption points, "
        f"{off * 1e3:.1f} ms without, {base * 1e3:.1f} ms on the trio loop: {on / off:.2f}x "
        f"({points} preemption points, {(on - off) / points * 1e6:.0f} us each)"
    )
    print(f"thread-race canary: {canary_seeds() * 1e3:.1f} ms per seed")
    if args.agent:
        seeds = [1, 2, 3]
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        mine = agent_seconds(here, seeds)
        line = f"agent_chaos: {mine:.2f} s per seed (seeds {seeds})"
        if args.baseline:
            theirs = agent_seconds(args.baseline, seeds)
            line += f"; baseline {theirs:.2f} s: ratio {mine / theirs:.2f}"
        print(line)


if __name__ == "__main__":
    main()
