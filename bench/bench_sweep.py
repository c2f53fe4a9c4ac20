"""Sweep throughput: seeds per minute and virtual/wall for a scenario, serial and parallel.

    .venv/bin/python bench/bench_sweep.py [SCENARIO] [SEEDS] [JOBS...]

Defaults: kv_linearizability, 200 seeds, jobs 1 and 2. Prints one line per job count; the
rates are over elapsed wall time, including starting worker processes. Run it on an idle
machine: other load changes the figures a lot.
"""

from __future__ import annotations

import os
import sys

from kelpie_dst.scenario._sweep import plan, run_items, totals


def main() -> None:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    scenario = sys.argv[1] if len(sys.argv) > 1 else "kv_linearizability"
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    jobs_list = [int(j) for j in sys.argv[3:]] or [1, 2]
    items = plan([(scenario, (), range(seeds))])
    print(f"{scenario}: {seeds} seeds on {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    for jobs in jobs_list:
        outcome = run_items(items, jobs=jobs)
        t = totals(outcome.results)
        rate = len(outcome.results) * 60 / outcome.elapsed
        ratio = t["virtual_seconds"] / outcome.elapsed
        print(
            f"jobs={jobs}: {outcome.elapsed:6.2f}s  {rate:7,.0f} seeds/min  "
            f"{t['events'] / outcome.elapsed:7,.0f} events/s  virtual/wall {ratio:5,.0f}x  "
            f"failures {t['failures']}"
        )


if __name__ == "__main__":
    main()
