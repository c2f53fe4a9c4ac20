"""Sweep seeds in one process with kelpie_dst.run (a stand-in until `kelpie-dst sweep` exists).

Usage: python sweep.py MODULE:FUNCTION [SEEDS] [STRATEGY] [PCT_DEPTH]

Unlike the CLI, this does not pin PYTHONHASHSEED; run it as ``PYTHONHASHSEED=0 python sweep.py``
if the program iterates over sets of strings, so that its seeds replay under ``kelpie-dst run``.
"""

from __future__ import annotations

import importlib
import sys

import kelpie_dst


def main() -> None:
    entry = sys.argv[1]
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    strategy = sys.argv[3] if len(sys.argv) > 3 else "random"
    depth = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    module_name, _, function = entry.partition(":")
    program = getattr(importlib.import_module(module_name), function)
    failing = []
    for seed in range(seeds):
        result = kelpie_dst.run(program, seed=seed, strategy=strategy, pct_depth=depth)
        if not result.ok:
            failing.append(seed)
    shown = f"{strategy} depth={depth}" if strategy == "pct" else strategy
    print(f"{entry} strategy={shown}: {len(failing)} of {seeds} seeds failed")
    if failing:
        more = " ..." if len(failing) > 20 else ""
        print("failing seeds: " + " ".join(map(str, failing[:20])) + more)


if __name__ == "__main__":
    main()
