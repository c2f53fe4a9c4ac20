"""What the harness prints and writes: one line per mutant as it finishes, the table, the
summary line, replay lines, and the JSON report (``--json``)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ._harness import MutantOutcome, Summary, summarise
from ._spec import MutantSpec

__all__ = ["DEFAULT_SPEC", "finished_line", "replay_line", "summary_line", "table", "write_json"]

DEFAULT_SPEC = "tests/quality/mutants.toml"
JSON_VERSION = 1
_LABEL = {
    "caught": "caught",
    "survived": "SURVIVED",
    "unverified": "UNVERIFIED",
    "stale": "STALE",
    "error": "ERROR",
    "holds": "holds",
    "lost": "LOST",
    "unrecorded": "UNRECORDED",
}


def replay_line(spec: MutantSpec, outcome: MutantOutcome) -> str | None:
    """``kelpie-dst mutate [--spec FILE] --only NAME --replay TOKEN`` for a catch."""
    catch = outcome.catch
    token = catch.token() if catch is not None else None
    if token is None or not catch or not catch.trace_hash:
        return None
    parts = ["kelpie-dst", "mutate"]
    if str(spec.path) != DEFAULT_SPEC:
        parts += ["--spec", str(spec.path)]
    parts += ["--only", outcome.mutant.name, "--replay", token.encode()]
    return shlex.join(parts)


def finished_line(outcome: MutantOutcome) -> str:
    """The line printed when a mutant is done."""
    label = f"{_LABEL.get(outcome.status, outcome.status):<10}"
    name = outcome.mutant.name
    catch = outcome.catch
    if outcome.status in ("caught", "unverified") and catch is not None:
        text = (
            f"{label} {name}: {catch.scenario} seed {catch.seed} after {catch.runs} seed-run(s) "
            f"({outcome.wall_seconds:.1f}s): {catch.fired}"
        )
    elif outcome.status == "survived":
        wall = f"{outcome.wall_seconds:.1f}s"
        text = f"{label} {name}: not caught in {outcome.runs} seed-runs ({wall})"
    elif outcome.status in ("holds", "lost") and catch is not None:
        text = f"{label} {name}: {catch.scenario} seed {catch.seed}: {catch.fired}"
    else:
        text = f"{label} {name}"
    if outcome.detail and not outcome.good:
        text += f"\n           {outcome.detail}"
    return text


def table(outcomes: Sequence[MutantOutcome], *, check: bool) -> Table:
    title = "recorded catches" if check else "mutants"
    grid = Table(title=title, title_justify="left")
    grid.add_column("mutant", no_wrap=True)
    grid.add_column("category", no_wrap=True)
    grid.add_column("result")
    if not check:
        grid.add_column("seed-runs", justify="right")
        grid.add_column("wall", justify="right")
    grid.add_column("scenario")
    grid.add_column("seed", justify="right")
    grid.add_column("fired")
    if not check:
        grid.add_column("verified")
    for o in outcomes:
        catch = o.catch
        row = [o.mutant.name, o.mutant.category, _LABEL.get(o.status, o.status)]
        if not check:
            runs = str(catch.runs) if catch is not None else f"{o.runs} (none)"
            row += [runs, f"{o.wall_seconds:.1f}s" if o.runs else "-"]
        row += [
            catch.scenario if catch else "-",
            str(catch.seed) if catch else "-",
            catch.fired if catch else "-",
        ]
        if not check:
            row.append(_verified(o))
        grid.add_row(*row)
    return grid


def _verified(outcome: MutantOutcome) -> str:
    v = outcome.verification
    if v is None:
        return "-"
    replay = "same hash" if v.reproduced else "HASH DIFFERS"
    clean = "passes on main" if v.clean_passes else f"main: {v.clean_fired}"
    return f"{replay}; {clean}"


def summary_line(summary: Summary, *, check: bool, scenarios: int, seeds: int | None) -> str:
    if check:
        return f"{summary.good} of {summary.mutants} recorded catches hold"
    text = f"caught {summary.good} of {summary.mutants} mutants"
    if seeds is not None:
        text += f" ({scenarios} scenario(s), up to {seeds} seed(s) each)"
    if summary.runs_median is not None:
        text += f"; seed-runs to catch: median {summary.runs_median:g}, max {summary.runs_max}"
    return text + f"; {summary.runs_total} seed-runs in all"


def print_report(
    out: Console,
    spec: MutantSpec,
    outcomes: Sequence[MutantOutcome],
    *,
    check: bool,
    scenarios: int,
    seeds: int | None,
) -> None:
    out.print(table(outcomes, check=check))
    for o in outcomes:
        line = replay_line(spec, o)
        if line is not None and o.status in ("caught", "unverified", "lost"):
            print(f"replay {o.mutant.name}: {line}")
        if o.detail and not o.good:
            print(f"{o.mutant.name}: {o.detail}")
    print(summary_line(summarise(outcomes), check=check, scenarios=scenarios, seeds=seeds))


def write_json(
    path: str | Path,
    spec: MutantSpec,
    outcomes: Sequence[MutantOutcome],
    meta: dict[str, Any],
) -> None:
    rows = []
    for o in outcomes:
        row = o.to_json()
        row["replay"] = replay_line(spec, o)
        rows.append(row)
    document = {
        "version": JSON_VERSION,
        "spec": str(spec.path),
        **meta,
        "summary": summarise(outcomes).to_json(),
        "mutants": rows,
    }
    Path(path).write_text(json.dumps(document, indent=2) + "\n")
