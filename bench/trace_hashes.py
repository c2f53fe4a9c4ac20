"""Trace hashes of the agent scenarios, to prove speed work changes nothing a trace sees.

    .venv/bin/python bench/trace_hashes.py [--seeds 6] [--first 0] [--shipped] [SCENARIO ...]
    .venv/bin/python bench/trace_hashes.py --all --seeds 2 > after.txt   # every shipped scenario
    diff before.txt after.txt

Prints one line per scenario, seed and path (``via=http`` as shipped and, for the scenarios
whose workload takes it, ``via=direct``): the trace hash, the event count, the exit code, the
task steps the scheduler ran, and the CPU seconds the run took. Run it on main and on a branch
and diff all but the last column (``cut -d' ' -f1-7``; the CPU column is only a rough guide
on a shared machine). Defaults to the four scenarios #15 names.
"""

from __future__ import annotations

import argparse
import os
import time

from kelpie_dst.scenario import load_scenario, run_scenario

DEFAULT = ("agent_chaos", "agent_conversations", "agent_uploads", "agent_schedules")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", nargs="*", default=list(DEFAULT))
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument(
        "--all", action="store_true", help="every shipped scenario in scenarios/ (as shipped only)"
    )
    parser.add_argument("--shipped", action="store_true", help="as shipped only (no via=direct)")
    args = parser.parse_args()
    if args.all:
        here = os.path.dirname(os.path.abspath(__file__))
        folder = os.path.join(here, os.pardir, "scenarios")
        args.scenarios = sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".toml"))
        args.shipped = True
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for name in args.scenarios:
        shipped = load_scenario(name, ())
        vias = ["http", "direct"] if "via" in shipped.workload.params else ["shipped"]
        if args.shipped:
            vias = ["shipped"]
        for via in vias:
            overrides = () if via == "shipped" else (f"workload.params.via={via}",)
            scenario = load_scenario(name, overrides)
            for seed in range(args.first, args.first + args.seeds):
                start = time.process_time()
                run = run_scenario(scenario, seed)
                cpu = time.process_time() - start
                result = run.result
                print(
                    f"{name} {via} {seed} {result.trace_hash} {result.events} "
                    f"{result.exit_code} {result.steps} {cpu:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
