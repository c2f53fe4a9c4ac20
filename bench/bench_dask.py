"""A sweep on a Dask ``LocalCluster`` against the same sweep in local worker processes: the
per-seed trace hashes must be equal, and the seeds per minute of each.

    .venv/bin/python bench/bench_dask.py [SCENARIO] [SEEDS] [WORKERS]

Defaults: kv_linearizability, 200 seeds, 2 workers (one thread each). Both sweeps run under
``PYTHONHASHSEED=6640``, the seed Dask's nanny gives its worker processes (docs/sweeps.md),
through the ``kelpie-dst`` command with ``--json``. Needs ``kelpie[cluster]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from distributed import LocalCluster

HASHSEED = "6640"


def sweep(args: list[str], report: Path) -> tuple[dict[str, Any], float]:
    start = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "kelpie_dst", "sweep", *args, "--json", str(report)],
        env=dict(os.environ, PYTHONHASHSEED=HASHSEED),
        stdout=subprocess.DEVNULL,
        check=False,
    )
    return json.loads(report.read_text()), time.monotonic() - start


def main() -> None:
    scenario = sys.argv[1] if len(sys.argv) > 1 else "kv_linearizability"
    seeds = sys.argv[2] if len(sys.argv) > 2 else "200"
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    args = [scenario, "--seeds", seeds]
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
    ):
        remote, remote_s = sweep([*args, "--cluster", cluster.scheduler_address], Path(tmp, "r"))
        local, local_s = sweep([*args, "--jobs", str(workers)], Path(tmp, "l"))
    key = "trace_hash"
    pairs = list(zip(remote["results"], local["results"], strict=True))
    same = sum(r[key] == l_[key] and r["seed"] == l_["seed"] for r, l_ in pairs)
    print(f"{scenario}: {seeds} seeds, {workers} workers, load average {os.getloadavg()[0]:.2f}")
    print(f"per-seed trace hashes equal: {same} of {len(pairs)}")
    for name, data, seconds in (("Dask LocalCluster", remote, remote_s), ("local", local, local_s)):
        rate = data["summary"]["seeds_per_minute"]
        print(f"{name:<18} {seconds:6.1f}s wall (process included)  {rate:7,.0f} seeds/min")


if __name__ == "__main__":
    main()
