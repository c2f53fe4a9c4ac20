"""The mutation harness's figures: how many planted bugs the agent scenarios catch, and how fast.

    .venv/bin/python bench/bench_mutants.py [--seeds N] [--jobs J] [--only NAME]... [--json FILE]

Runs every mutant of tests/quality/mutants.toml against the default scenario set (every
shipped scenario of the agent workload), seeds interleaved across scenarios, up to ``N`` seeds
per scenario (default 100, the target of issue #13), and prints the harness's table and:

* caught X of Y (every catch verified: same trace hash in a fresh process, passes on main);
* seed-runs to catch (all scenarios counted): median and max;
* seeds to catch: the seed number reached per scenario (seed-runs / scenarios, rounded up),
  the unit of the targets "every bug within 100 seeds, the median within 20";
* wall time to catch: median and max, and the whole run.

The figures depend on the machine only through the wall times. Expect hours at 100 seeds
with survivors (each survivor costs 100 x scenarios seed-runs); run it on an idle machine.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console

from kelpie_dst.mutate import Harness, interleave, load_spec, scenario_set, summarise
from kelpie_dst.mutate._report import finished_line, print_report, write_json

SPEC = "tests/quality/mutants.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    spec = load_spec(SPEC)
    mutants = spec.select(args.only)
    refs = scenario_set(spec, [])
    items = interleave(refs, [], range(args.seeds))
    load = os.getloadavg()[0]
    print(
        f"{len(mutants)} mutants x {len(refs)} scenarios x {args.seeds} seeds, "
        f"{args.jobs} job(s), {os.cpu_count()} cores, load {load:.2f}"
    )

    def on_event(kind: str, data: Mapping[str, Any]) -> None:
        if kind == "mutant":
            print(finished_line(data["outcome"]), flush=True)

    harness = Harness(spec, jobs=args.jobs, on_event=on_event)
    started = time.monotonic()
    outcomes = harness.run(mutants, items)
    elapsed = time.monotonic() - started
    out = Console(width=200)
    print_report(out, spec, outcomes, check=False, scenarios=len(refs), seeds=args.seeds)
    summary = summarise(outcomes)
    caught = [o for o in outcomes if o.runs_to_catch is not None]
    runs = [o.runs_to_catch or 0 for o in caught]
    seeds = [math.ceil(r / len(refs)) for r in runs]
    walls = [o.wall_seconds for o in caught]
    print(f"caught: {summary.good} of {summary.mutants} within {args.seeds} seeds per scenario")
    if caught:
        print(
            f"seed-runs to catch: median {statistics.median(runs):g}, max {max(runs)}; "
            f"seeds to catch: median {statistics.median(seeds):g}, max {max(seeds)}"
        )
        print(f"wall time to catch: median {statistics.median(walls):.1f}s, max {max(walls):.1f}s")
    print(f"whole run: {elapsed:.0f}s, {summary.runs_total} seed-runs")
    if args.json:
        meta = {"mode": "bench", "scenarios": refs, "seeds": args.seeds, "jobs": args.jobs}
        write_json(args.json, spec, outcomes, meta)


if __name__ == "__main__":
    main()
