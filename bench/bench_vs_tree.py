"""CPU per seed of a scenario in this checkout against another checkout, alternated.

    git worktree add --detach /tmp/base b216505     # e.g. the end of round 1
    .venv/bin/python bench/bench_vs_tree.py /tmp/base agent_chaos --seeds 0-5 --rounds 3

Each round runs the scenario's seeds in a fresh process per tree (one warm-up seed first, not
counted), the other tree first, with this venv and ``PYTHONPATH`` set to the tree, and prints
CPU seconds per seed (``getrusage``: inside a seed the guards serve ``time.process_time``
virtual time) and the ratio this/other, with the load average beside it. Issue #13's budget
("the new oracles and the harder world cost at most 25% more per seed than today's
agent_chaos") is this ratio against the checkout of the day the issue was filed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import resource, sys
from kelpie_dst.scenario import load_scenario, run_scenario
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
name, seeds = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
scenario = load_scenario(name, ())
run_scenario(scenario, 999_999)
start = cpu()
failed = sum(run_scenario(scenario, seed).result.failure is not None for seed in seeds)
print(f"{(cpu() - start) / len(seeds):.4f} {failed}")
"""


def per_seed(tree: Path, scenario: str, seeds: list[int]) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, scenario, ",".join(map(str, seeds))],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        sys.exit(f"bench_vs_tree: {tree}: {out.stderr.strip().splitlines()[-1:]}")
    cpu, failed = out.stdout.split()[-2:]
    return float(cpu), int(failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", help="the other checkout (a directory with kelpie_dst)")
    parser.add_argument("scenario", nargs="?", default="agent_chaos")
    parser.add_argument("--seeds", default="0-5", help="a range A-B (default 0-5)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    other = Path(args.other).resolve()
    if not (other / "kelpie_dst").is_dir():
        sys.exit(f"bench_vs_tree: {other} has no kelpie_dst package")
    low, _, high = args.seeds.partition("-")
    seeds = list(range(int(low), int(high or low) + 1))
    print(f"{args.scenario}, seeds {args.seeds}: CPU s per seed, other = {other}")
    for round_ in range(1, args.rounds + 1):
        load = os.getloadavg()[0]
        theirs, their_fails = per_seed(other, args.scenario, seeds)
        ours, our_fails = per_seed(ROOT, args.scenario, seeds)
        print(
            f"round {round_} (load {load:.1f}): other {theirs:.3f}, this {ours:.3f}, "
            f"this/other {ours / theirs:.2f}x (failed: other {their_fails}, this {our_fails})",
            flush=True,
        )


if __name__ == "__main__":
    main()
