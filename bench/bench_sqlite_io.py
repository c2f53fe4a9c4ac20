"""Real time and CPU per seed of a SQLite-backed scenario, Dspeed-17 on and off, in one process.

    .venv/bin/python bench/bench_sqlite_io.py [--scenario agent_sqlite] [--seeds 3] [--rounds 2]

With ``[topology.storage] backend = "sqlite"`` a run keeps real SQLite files: the production
engine fsyncs every transaction (``synchronous=FULL``), and each read of a ``SqliteView``
recovers a scratch copy of the crash image, whose close checkpointed with fsyncs too. Dspeed-17
puts the run's files on a RAM file system when there is a roomy one and reads the scratch copy
with ``synchronous=OFF``. Both change only real time (and some CPU), never a byte of the files.
This runs the same seeds both ways, alternating seed by seed so that the load of a shared
machine hits both alike; per seed it keeps the minimum over the rounds (real time and CPU) and
prints the sums, their ratios and the load average. Both ways must give the same trace hashes.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kelpie_dst.scenario import Scenario, load_scenario, run_scenario
from kelpie_dst.shims import _sqlite_disk


@contextmanager
def _on_disk() -> Iterator[None]:
    """Before Dspeed-17: the files in the temp directory, the scratch copy with fsyncs."""
    saved = _sqlite_disk.RAM_DIRECTORY, _sqlite_disk.VIEW_SYNCHRONOUS
    _sqlite_disk.RAM_DIRECTORY, _sqlite_disk.VIEW_SYNCHRONOUS = "/nonexistent", None
    try:
        yield
    finally:
        _sqlite_disk.RAM_DIRECTORY, _sqlite_disk.VIEW_SYNCHRONOUS = saved


def _seed(scenario: Scenario, seed: int) -> tuple[float, float, str]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    run = run_scenario(scenario, seed)
    return time.perf_counter() - wall, time.process_time() - cpu, run.result.trace_hash


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="agent_sqlite")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    scenario = load_scenario(args.scenario, ())
    print(f"files on {_sqlite_disk.files_root() or 'the temp directory'} with Dspeed-17")
    run_scenario(scenario, args.seeds)  # warm-up: imports, the app, first-request set-up
    load = os.getloadavg()[0]
    best: dict[tuple[bool, int], tuple[float, float]] = {}
    hashes: dict[tuple[bool, int], str] = {}
    for _ in range(args.rounds):
        for seed in range(args.seeds):
            for on in (True, False):
                if on:
                    wall, cpu, hashes[on, seed] = _seed(scenario, seed)
                else:
                    with _on_disk():
                        wall, cpu, hashes[on, seed] = _seed(scenario, seed)
                old = best.get((on, seed), (wall, cpu))
                best[on, seed] = (min(old[0], wall), min(old[1], cpu))
    seeds = range(args.seeds)
    wall_on, cpu_on = (sum(best[True, s][i] for s in seeds) / args.seeds for i in (0, 1))
    wall_off, cpu_off = (sum(best[False, s][i] for s in seeds) / args.seeds for i in (0, 1))
    same = all(hashes[True, s] == hashes[False, s] for s in seeds)
    print(
        f"{args.scenario}, seeds 0-{args.seeds - 1}, min of {args.rounds} rounds, load average "
        f"{load:.2f} before, {os.getloadavg()[0]:.2f} after\n"
        f"  real time per seed: with {wall_on:.2f} s, without {wall_off:.2f} s: "
        f"{wall_on / wall_off:.3f}x\n"
        f"  CPU per seed:       with {cpu_on:.2f} s, without {cpu_off:.2f} s: "
        f"{cpu_on / cpu_off:.3f}x\n"
        f"  trace hashes equal: {same}",
        flush=True,
    )
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
