"""Start-up CPU of a whole ``kelpie-dst run --entry`` process against bare trio, and what the
bytecode cache is worth.

    .venv/bin/python bench/bench_startup.py [--runs 10]

Rows, each a fresh process, interleaved and repeated; the figure is the minimum CPU (user +
system, from ``getrusage(RUSAGE_CHILDREN)``) over the runs, since on a shared machine other
load only ever adds to it:

* ``bare trio``: ``python -c "import trio; trio.run(main)"`` on an empty ``async def main``;
* ``import kelpie_dst``: the package alone (no kelpie_agent, pytest, pydantic: issue #15);
* ``kelpie-dst run --entry``: the console script on the same empty ``main`` (the launcher
  re-executes Python once to pin ``PYTHONHASHSEED``), with and without a warm bytecode cache
  (cold: ``PYTHONPYCACHEPREFIX`` points at a fresh empty directory, so every module compiles).

Target (#15): the empty ``--entry`` run at most 1.6x bare trio's CPU.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

EMPTY = "async def main():\n    pass\n"


def child_cpu(argv: list[str], env: dict[str, str], cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    python = sys.executable
    script = str(Path(python).with_name("kelpie-dst"))
    with tempfile.TemporaryDirectory() as work:
        Path(work, "empty_main.py").write_text(EMPTY)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        # a PYTHONPATH given to the bench comes after the program's directory (to measure
        # another checkout of kelpie with this venv)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [work, os.environ.get("PYTHONPATH")]))
        rows: dict[str, tuple[list[str], dict[str, str]]] = {
            "bare trio": (
                [python, "-c", "import trio, empty_main; trio.run(empty_main.main)"],
                env,
            ),
            "python -c pass": ([python, "-c", "pass"], env),
            "import kelpie_dst": ([python, "-c", "import kelpie_dst"], env),
            "kelpie-dst run --entry": (
                [script, "run", "--entry", "empty_main:main", "--seed", "1"],
                env,
            ),
        }
        cpu: dict[str, list[float]] = {name: [] for name in [*rows, "... cold bytecode cache"]}
        for argv, row_env in rows.values():  # warm the caches
            child_cpu(argv, row_env, work)
        for run in range(args.runs):
            for name, (argv, row_env) in rows.items():
                cpu[name].append(child_cpu(argv, row_env, work))
            cold = dict(env, PYTHONPYCACHEPREFIX=str(Path(work, f"pycache-{run}")))
            cpu["... cold bytecode cache"].append(
                child_cpu(rows["kelpie-dst run --entry"][0], cold, work)
            )
    bare = min(cpu["bare trio"])
    print(f"min CPU of {args.runs} fresh processes each; load average {os.getloadavg()[0]:.2f}")
    for name, values in cpu.items():
        best = min(values)
        print(f"{name:<28} {best * 1000:7.0f} ms  {best / bare:5.2f}x bare trio")


if __name__ == "__main__":
    main()
