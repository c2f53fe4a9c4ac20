"""CPU cost per seed of a scenario, in this process, with the oracles' own share.

    .venv/bin/python bench/bench_oracles.py [SCENARIO] [SEEDS] [--set PATH=VALUE ...]

Runs one warm-up seed, then SEEDS seeds in this process, and prints CPU seconds per seed
(process time, so other load on the machine matters less than for wall time), virtual seconds
per CPU second, and the time spent inside the boundary oracles (the prompt auditor, the ledger,
the database durability checks), measured with a profiler hook on just those functions.

To compare two versions of the code (issue #13's budget: the oracles and the harder world may
cost at most 25% more per seed than before), run this script from each checkout, alternately,
and divide: `python bench/bench_oracles.py agent_chaos 10` in both.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from kelpie_dst.scenario import load_scenario, run_scenario

ORACLES: list[tuple[str, str]] = [
    ("kelpie_dst.workloads._agent_oracles", "PromptAuditor.observe"),
    ("kelpie_dst.workloads._agent_client", "Clients.check_durable"),
    ("kelpie_dst.workloads._agent_world", "Journal.commit"),
]


def _cpu() -> float:
    """CPU seconds of this process. Not time.process_time: while a seed runs, the simulation's
    guards serve it virtual time (and rewrite every module-level reference to it), so every
    oracle call took "0 s" and the share printed 0.0%."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(spent: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = _cpu()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += _cpu() - start

    return wrapper


def main() -> None:
    args = sys.argv[1:]
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    plain = [a for i, a in enumerate(args) if a != "--set" and (i == 0 or args[i - 1] != "--set")]
    name = plain[0] if plain else "agent_chaos"
    seeds = int(plain[1]) if len(plain) > 1 else 10
    spent = [0.0]
    for module_name, qualname in ORACLES:
        try:
            module = __import__(module_name, fromlist=["_"])
        except ImportError:
            continue
        owner_name, attr = qualname.split(".")
        owner = getattr(module, owner_name, None)
        if owner is not None and hasattr(owner, attr):
            setattr(owner, attr, _timed(spent, getattr(owner, attr)))
    scenario = load_scenario(name, sets)
    run_scenario(scenario, 10_000)  # warm-up: imports, first-use caches
    spent[0] = 0.0
    virtual = 0.0
    start = time.process_time()
    failures = 0
    for seed in range(seeds):
        run = run_scenario(scenario, seed)
        virtual += run.result.virtual_time
        failures += not run.ok
    cpu = time.process_time() - start
    print(
        f"{name}: {seeds} seeds, {cpu / seeds:.3f} CPU s/seed, virtual/CPU {virtual / cpu:.1f}x, "
        f"oracles {100 * spent[0] / cpu:.1f}% of CPU, failures {failures}, "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
