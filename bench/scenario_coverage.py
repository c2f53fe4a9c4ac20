"""Which lines of kelpie_agent the mutation harness's default scenario set never runs.

    .venv/bin/pip install coverage
    .venv/bin/python bench/scenario_coverage.py [--seeds 0,1] [--scenario NAME]... [--top 40]

A planted bug in code no scenario reaches survives every sweep, whatever the oracles check, so
this is the first question to ask of a survivor, and the map of where the next scenario should
go. Runs each scenario of ``defaults.scenarios`` in tests/quality/mutants.toml (or the ones
named) for the given seeds, in this process under coverage.py (the runs' trace hashes do not
change: the simulation does not see the tracer), and prints each scenario's verdict and then
the files of kelpie_agent by lines never run, most first. ``--html DIR`` also writes
coverage's HTML report. Expect about twice a sweep's CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def default_set() -> list[str]:
    spec = tomllib.loads((ROOT / "tests/quality/mutants.toml").read_text())
    return list(spec["defaults"]["scenarios"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (default: 0)")
    parser.add_argument("--scenario", action="append", help="a scenario (default: the set)")
    parser.add_argument("--top", type=int, default=40, help="files to list (default: 40)")
    parser.add_argument("--html", help="also write coverage's HTML report to this directory")
    args = parser.parse_args()
    try:
        import coverage
    except ImportError:
        sys.exit("scenario_coverage: needs coverage.py (pip install coverage)")
    if os.environ.get("PYTHONHASHSEED") is None:
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])  # the runs' hash seed
    seeds = [int(s) for s in args.seeds.split(",")]
    names = args.scenario or default_set()
    cov = coverage.Coverage(source=["kelpie_agent"], data_file=None)
    cov.start()
    from kelpie_dst.scenario import load_scenario, run_scenario

    for name in names:
        scenario = load_scenario(name, ())
        for seed in seeds:
            run = run_scenario(scenario, seed)
            verdict = "passed" if run.result.failure is None else "FAILED"
            print(f"{name} seed {seed}: {verdict} ({run.result.wall_seconds:.1f}s)", flush=True)
    cov.stop()
    rows = []
    for path in sorted((ROOT / "kelpie_agent").rglob("*.py")):
        _, statements, _, missing, _ = cov.analysis2(str(path))
        if statements:
            rows.append((len(missing), len(statements), str(path.relative_to(ROOT))))
    total = sum(s for _, s, _ in rows)
    missed = sum(m for m, _, _ in rows)
    print(f"\nkelpie_agent under {len(names)} scenario(s) x seeds {args.seeds}:")
    print(f"{total - missed} of {total} statements run ({100 * (total - missed) / total:.0f}%)")
    print(f"{'never run':>9}  {'of':>5}  file")
    for miss, statements, rel in sorted(rows, reverse=True)[: args.top]:
        print(f"{miss:>9}  {statements:>5}  {rel}")
    if args.html:
        cov.html_report(directory=args.html)
        print(f"HTML report: {args.html}/index.html")


if __name__ == "__main__":
    main()
