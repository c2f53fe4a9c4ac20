"""What the scheduling events of the trace cost (issue #14: at most 10% per seed).

Runs seeds of a scenario (default ``agent_chaos``) in this process, each twice in a row: once
with the ``sched`` events (every task step and every timer folded into the trace hash) and once
without (``Trace.SCHEDULE = False``, the trace as it was before), alternating which goes first.
Prints the median CPU time per seed of each (this process's CPU seconds, which a busy shared
machine disturbs far less than wall time), their ratio, and the events each trace held::

    .venv/bin/python bench/bench_trace_cost.py [SCENARIO] [SEEDS]

Defaults: agent_chaos, 12 seeds. Seed 0 is run once first and not counted (imports, caches).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from kelpie_dst._trace import Trace
from kelpie_dst.scenario import load_scenario, run_scenario


def timed(scenario: object, seed: int, schedule: bool) -> tuple[float, int]:
    Trace.SCHEDULE = schedule
    start = time.process_time()
    run = run_scenario(scenario, seed)  # type: ignore[arg-type]
    return time.process_time() - start, run.result.events


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "agent_chaos"
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    scenario = load_scenario(name)
    run_scenario(scenario, 0)  # warm up: imports and caches
    with_sched: list[float] = []
    without: list[float] = []
    events_with = events_without = 0
    for seed in range(1, seeds + 1):
        order = (True, False) if seed % 2 else (False, True)
        for schedule in order:
            seconds, events = timed(scenario, seed, schedule)
            if schedule:
                with_sched.append(seconds)
                events_with += events
            else:
                without.append(seconds)
                events_without += events
    Trace.SCHEDULE = True
    a, b = statistics.median(without), statistics.median(with_sched)
    print(f"{name}: {seeds} seeds, load {os.getloadavg()[0]:.2f}")
    print(
        f"without sched events  {a * 1000:8.1f} ms CPU/seed  {events_without / seeds:10,.0f} events"
    )
    print(f"with sched events     {b * 1000:8.1f} ms CPU/seed  {events_with / seeds:10,.0f} events")
    print(f"cost                  {100 * (b / a - 1):+7.1f} %")
    pairs = [w / o for w, o in zip(with_sched, without, strict=True)]
    print(
        f"per-seed ratio        median {statistics.median(pairs):.3f}, "
        f"min {min(pairs):.3f}, max {max(pairs):.3f}"
    )


if __name__ == "__main__":
    main()
