"""Per-seed CPU and real time of scenarios on two source trees, side by side, at the same load.

    .venv/bin/python bench/bench_trees.py --before /path/to/main [--after .] [--seeds 3]
                                          [--rounds 2] SCENARIO ...

For each scenario and round, one fresh process per tree (``PYTHONPATH`` set to the tree) runs a
warm-up seed, then seeds 0 to N-1, and reports each seed's CPU (``time.process_time``) and real
time; the trees alternate, so that the load of a shared machine hits both alike. Per seed it
keeps the minimum over the rounds and prints, per scenario, the mean per seed on each tree and
the ratios, with the load average; the trace hashes of both trees must be equal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = """
import json, sys, time
from kelpie_dst.scenario import load_scenario, run_scenario
s = load_scenario(sys.argv[1], ())
run_scenario(s, 1000)
out = []
for seed in range(int(sys.argv[2])):
    w, c = time.perf_counter(), time.process_time()
    h = run_scenario(s, seed).result.trace_hash
    out.append((time.process_time() - c, time.perf_counter() - w, h))
print(json.dumps(out))
"""


def _run(tree: str, scenario: str, seeds: int) -> list[tuple[float, float, str]]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), PYTHONHASHSEED="0")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, scenario, str(seeds)],
        env=env,
        cwd=os.path.abspath(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    return [tuple(x) for x in json.loads(done.stdout.splitlines()[-1])]  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", nargs="+")
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", default=".")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(
        f"{'scenario':28} {'CPU before':>10} {'after':>7} {'ratio':>6}  "
        f"{'real before':>11} {'after':>7} {'ratio':>6}  load  same"
    )
    for name in args.scenarios:
        best: dict[tuple[str, int], tuple[float, float]] = {}
        hashes: dict[tuple[str, int], str] = {}
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            for tree in ("before", "after"):
                for seed, (cpu, wall, h) in enumerate(_run(getattr(args, tree), name, args.seeds)):
                    old = best.get((tree, seed), (cpu, wall))
                    best[tree, seed] = (min(old[0], cpu), min(old[1], wall))
                    hashes[tree, seed] = h
        n = args.seeds
        cpu_b, wall_b = (sum(best["before", s][i] for s in range(n)) / n for i in (0, 1))
        cpu_a, wall_a = (sum(best["after", s][i] for s in range(n)) / n for i in (0, 1))
        same = all(hashes["before", s] == hashes["after", s] for s in range(n))
        print(
            f"{name:28} {cpu_b:9.2f}s {cpu_a:6.2f}s {cpu_a / cpu_b:6.3f}  "
            f"{wall_b:10.2f}s {wall_a:6.2f}s {wall_a / wall_b:6.3f}  {load:4.1f}  {same}",
            flush=True,
        )


if __name__ == "__main__":
    main()
