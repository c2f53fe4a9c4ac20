"""Sweep throughput: seeds per minute for one scenario, on 1 and 2 (or more) jobs, and the
speed-up, with the load average beside it.

    .venv/bin/python bench/bench_sweep.py [SCENARIO] [SEEDS] [JOBS...]

Defaults: agent_chaos, 40 seeds, jobs 1 and 2. Each row is a whole sweep through the same
executors as ``kelpie-dst sweep``: ``--jobs 1`` runs the seeds in this process; more jobs fork
that many persistent workers from this process (which has loaded the scenario, and with it
every module its seeds need), so the rates include starting the workers. The trace hashes of
every row must agree (checked). Run it on an idle machine and read the load average printed
beside each row: other processes take cores away from the sweep (target #15: at least 1.8x
from 1 to 2 jobs on an idle 2-core machine).
"""

from __future__ import annotations

import os
import sys

from kelpie_dst.scenario import load_scenario
from kelpie_dst.scenario._sweep import plan, run_items, totals


def main() -> None:
    os.environ.setdefault("PYTHONHASHSEED", "0")
    scenario = sys.argv[1] if len(sys.argv) > 1 else "agent_chaos"
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    jobs_list = [int(j) for j in sys.argv[3:]] or [1, 2]
    load_scenario(scenario)  # imports the workload once, as the CLI does before it sweeps
    items = plan([(scenario, (), range(seeds))])
    print(f"{scenario}: {seeds} seeds on {os.cpu_count()} cores")
    first_rate = 0.0
    hashes: list[str] | None = None
    for jobs in jobs_list:
        before = os.getloadavg()[0]
        outcome = run_items(items, jobs=jobs, recheck=False)
        after = os.getloadavg()[0]
        got = [r.trace_hash for r in outcome.results]
        if hashes is not None and got != hashes:
            raise SystemExit(f"jobs={jobs}: the trace hashes differ from jobs={jobs_list[0]}")
        hashes = got
        t = totals(outcome.results)
        rate = len(outcome.results) * 60 / outcome.elapsed
        first_rate = first_rate or rate
        print(
            f"jobs={jobs}: {outcome.elapsed:7.1f}s  {rate:7,.1f} seeds/min  "
            f"speed-up {rate / first_rate:4.2f}x  {t['events'] / outcome.elapsed:7,.0f} events/s  "
            f"failures {t['failures']}  load average {before:.2f} before, {after:.2f} after"
        )


if __name__ == "__main__":
    main()
