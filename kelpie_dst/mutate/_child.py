"""The child side of the harness: one process that runs seeds with a mutant applied (or not).

The parent starts ``python -P -m kelpie_dst _mutant-run JOB.json`` with the overlay first on
``PYTHONPATH`` (``-P``: the working directory is not put before it). The child first checks
that every edited module really comes from the overlay (``module.__file__``), or, for a run of
the unmutated code, from the root, and refuses to run otherwise. Then it runs the job's sweep
items with the sweep machinery (:func:`~kelpie_dst.scenario._sweep.run_items`), or a
``kelpie-dst`` command line (a replay). It reports on stdout, one JSON object per line after
the :data:`MARK`, so that anything else the program prints is not mistaken for a report.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from ..scenario._sweep import SeedResult, SweepItem, run_items

__all__ = ["EXIT_ORIGIN", "MARK", "child_main", "emit", "pin_first", "wrong_origin"]

MARK = "@@kelpie-mutate@@ "
EXIT_ORIGIN = 70  # the mutated code was not the code imported


def emit(kind: str, **fields: Any) -> None:
    print(MARK + json.dumps({"type": kind, **fields}), flush=True)


def pin_first(path: str | None) -> None:
    """Put ``path`` first on ``sys.path`` (loading a scenario may have put the working
    directory there; spawned sweep workers copy this list)."""
    if path is not None:
        sys.path[:] = [path, *(p for p in sys.path if p != path)]


def wrong_origin(modules: dict[str, str], base: Path) -> str | None:
    """Import each module and check it was loaded from ``base / file``; the first problem."""
    for name, file in modules.items():
        try:
            module = importlib.import_module(name)
        except Exception as error:
            return f"importing {name} failed: {type(error).__name__}: {error}"
        origin = getattr(module, "__file__", None)
        expected = (base / file).resolve()
        if origin is None or Path(origin).resolve() != expected:
            return f"{name} was imported from {origin}, not from {expected}"
    return None


def child_main(job_path: str) -> NoReturn:
    started = time.monotonic()
    job = json.loads(Path(job_path).read_text())
    overlay: str | None = job["overlay"]
    pin_first(overlay)
    base = Path(overlay) if overlay is not None else Path(job["root"])
    problem = wrong_origin(job["modules"], base)
    if problem is not None:
        emit("error", message=problem)
        sys.exit(EXIT_ORIGIN)
    emit("ready", python=sys.version.split()[0])
    if job.get("argv"):
        from .._cli import main

        main(job["argv"])
        sys.exit(0)
    items = [
        SweepItem(index, ref, tuple(overrides), seed)
        for index, (ref, overrides, seed) in enumerate(job["items"])
    ]

    def report(result: SeedResult) -> None:
        emit("result", arrived=time.monotonic() - started, **result.to_json())

    pin_first(overlay)
    outcome = run_items(
        items,
        jobs=int(job.get("jobs", 1)),
        fail_fast=bool(job.get("fail_fast", False)),
        on_result=report,
    )
    emit("done", elapsed=time.monotonic() - started, stopped=outcome.stopped)
    sys.exit(0)
