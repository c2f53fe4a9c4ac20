"""``kelpie-dst mutate``: run planted bugs against the scenarios and report which are caught
(docs/mutation.md)."""

from __future__ import annotations

import difflib
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._cli_common import console, interruptible, set_option
from ._entry import parse_duration
from ._errors import UsageError
from .mutate import (
    Catch,
    Harness,
    Mutant,
    MutantOutcome,
    MutantSpec,
    MutantStale,
    interleave,
    load_catches,
    load_spec,
    save_catches,
    scenario_set,
)
from .mutate._child import child_main
from .mutate._launch import Launcher
from .mutate._overlay import overlay
from .mutate._report import DEFAULT_SPEC, finished_line, print_report, write_json
from .scenario import ReplayToken, load_scenario

__all__ = ["mutant_run_command", "mutate_command"]

err_console = Console(stderr=True, highlight=False)  # progress (rich loads with this command)


@click.command("mutate")
@click.option("--spec", "spec_path", default=DEFAULT_SPEC, show_default=True, metavar="FILE")
@click.option("--only", multiple=True, metavar="NAME", help="Only this mutant (repeatable).")
@click.option("--scenario", "scenarios", multiple=True, metavar="SCENARIO", help="Repeatable.")
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="Seeds per scenario.")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--json", "json_path", default=None, metavar="FILE", help="Write a JSON report.")
@click.option("--record", is_flag=True, help="Record each verified catch (<spec>_caught.toml).")
@click.option("--check", is_flag=True, help="Replay the recorded catches only (fast, for CI).")
@click.option("--list", "list_only", is_flag=True, help="List the mutants and exit.")
@click.option("--diff", is_flag=True, help="Print each mutant as a unified diff and exit.")
@click.option("--replay", default=None, metavar="TOKEN", help="Replay a catch of one mutant.")
@click.option(
    "--timeout",
    default="15m",
    show_default=True,
    metavar="DURATION",
    help="Kill a child that reports nothing for this long (wall time).",
)
@set_option
def mutate_command(
    spec_path: str,
    only: tuple[str, ...],
    scenarios: tuple[str, ...],
    seeds: int | None,
    start: int,
    jobs: int,
    json_path: str | None,
    record: bool,
    check: bool,
    list_only: bool,
    diff: bool,
    replay: str | None,
    timeout: str,
    sets: tuple[str, ...],
) -> None:
    """Run each planted bug (mutant) of a spec against the scenarios, seeds interleaved across
    them, until a seed catches it; verify every catch; exit 0 only if every mutant is caught."""
    spec = load_spec(spec_path)
    mutants = spec.select(only)
    flags = (("--check", check), ("--list", list_only), ("--diff", diff), ("--replay", replay))
    modes = [name for name, on in flags if on]
    if len(modes) > 1:
        raise UsageError(f"{' and '.join(modes)} cannot be combined")
    sweeping = scenarios or seeds is not None or start or sets
    if modes and (sweeping or record):
        extra = "--record" if record else "--scenario/--seeds/--start/--set"
        raise UsageError(f"{extra} is for sweeping, not for {modes[0]}")
    if list_only:
        _list(spec, mutants)
        return
    if diff:
        _diff(spec, mutants)
        return
    if replay is not None:
        if len(mutants) != 1:
            raise UsageError("--replay needs exactly one mutant: give --only NAME")
        sys.exit(_replay(spec, mutants[0], replay, parse_duration(timeout)))
    wall_limit = parse_duration(timeout)
    if check:
        catches = load_catches(spec.caught_path)
        console.print(
            f"kelpie-dst: checking {len(mutants)} mutant(s) of {spec.path} against "
            f"{spec.caught_path}, {jobs} job(s)",
            markup=False,
        )
        outcomes = _execute(mutants, jobs, wall_limit, len(mutants), spec, catches=catches)
        refs: list[str] = []
        count: int | None = None
    else:
        refs = scenario_set(spec, scenarios)
        if not refs:
            raise UsageError(f"no scenario runs the workload {spec.defaults.workload}")
        for ref in refs:
            load_scenario(ref, sets)  # one-line errors before anything runs
        count = seeds if seeds is not None else spec.defaults.seeds
        items = interleave(refs, sets, range(start, start + count))
        console.print(
            f"kelpie-dst: {len(mutants)} mutant(s) x {len(refs)} scenario(s) "
            f"({', '.join(refs)}) x {count} seed(s) from {start}: up to {len(items)} seed-runs "
            f"each, {jobs} job(s)",
            markup=False,
        )
        outcomes = _execute(mutants, jobs, wall_limit, len(mutants) * len(items), spec, items=items)
    out = Console(highlight=False, width=max(console.width, 200))
    print_report(out, spec, outcomes, check=check, scenarios=len(refs), seeds=count)
    if json_path:
        meta = {
            "mode": "check" if check else "run",
            "scenarios": refs,
            "seeds": count,
            "start": start,
            "jobs": jobs,
            "overrides": list(sets),
        }
        write_json(json_path, spec, outcomes, meta)
    if record:
        _record(spec, outcomes)
    sys.exit(0 if all(o.good for o in outcomes) else 1)


def _execute(
    mutants: Sequence[Mutant],
    jobs: int,
    timeout: float,
    total: int,
    spec: MutantSpec,
    *,
    items: Sequence[list[Any]] = (),
    catches: Mapping[str, Catch] | None = None,
) -> list[MutantOutcome]:
    """Sweep ``items`` against each mutant, or (with ``catches``) check the recorded ones,
    with a progress bar and a line per mutant as it finishes."""
    progress = Progress(
        TextColumn("[bold]mutate"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[done]}/{task.fields[mutants]} mutants"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    task = progress.add_task("mutate", total=total, done=0, mutants=len(mutants))
    lock = threading.Lock()
    finished = [0]

    counted = "mutant" if catches is not None else "run"  # what the bar counts

    def on_event(kind: str, data: Mapping[str, Any]) -> None:
        with lock:
            if kind == counted:
                progress.update(task, advance=1)
            if kind == "mutant":
                finished[0] += 1
                progress.update(task, done=finished[0])
                line = finished_line(data["outcome"])
                if err_console.is_terminal:
                    progress.console.print(line, markup=False, highlight=False)
                print(line, flush=True)

    harness = Harness(spec, jobs=jobs, timeout=timeout, on_event=on_event)
    with progress, interruptible():
        try:
            if catches is not None:
                return harness.check(mutants, catches)
            return harness.run(mutants, items)
        except BaseException:
            harness.launcher.stop()
            raise


def _record(spec: MutantSpec, outcomes: Sequence[MutantOutcome]) -> None:
    catches = load_catches(spec.caught_path)
    new = 0
    for outcome in outcomes:
        if outcome.status == "caught" and outcome.catch is not None:
            catches[outcome.mutant.name] = outcome.catch
            new += 1
    names = [m.name for m in spec.mutants]
    gone = sorted(set(catches) - set(names))  # mutants taken out of the spec: nothing to replay
    kept = [c for c in catches.values() if c.mutant in names]
    save_catches(spec.caught_path, spec.path.name, kept, names)
    dropped = f"; dropped the records of {', '.join(gone)} (no longer in the spec)" if gone else ""
    console.print(f"recorded {new} catch(es) in {spec.caught_path}{dropped}", markup=False)


def _list(spec: MutantSpec, mutants: Sequence[Mutant]) -> None:
    catches = load_catches(spec.caught_path)
    grid = Table(title=f"mutants of {spec.path}", title_justify="left")
    for column in ("mutant", "category", "files", "applies", "recorded catch", "breaks"):
        grid.add_column(column)
    for mutant in mutants:
        try:
            mutant.check(spec.root)
            applies = "yes"
        except MutantStale:
            applies = "NO"
        catch = catches.get(mutant.name)
        recorded = f"{catch.scenario} seed {catch.seed}: {catch.fired}" if catch else "-"
        files = "\n".join(mutant.files)
        grid.add_row(mutant.name, mutant.category, files, applies, recorded, mutant.breaks)
    Console(highlight=False, width=max(console.width, 160)).print(grid)


def _diff(spec: MutantSpec, mutants: Sequence[Mutant]) -> None:
    for mutant in mutants:
        print(f"# {mutant.name} ({mutant.category}): {mutant.breaks}")
        texts = mutant.check(spec.root)
        for file, text in texts.items():
            original = (spec.root / file).read_text()
            sys.stdout.writelines(
                difflib.unified_diff(
                    original.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    f"a/{file}",
                    f"b/{file}",
                )
            )


def _replay(spec: MutantSpec, mutant: Mutant, token: str, timeout: float) -> int:
    decoded = ReplayToken.decode(token)  # a one-line error for a damaged token
    modules = {e.module: e.file for e in mutant.edits if e.module is not None}
    console.print(f"kelpie-dst: replaying with mutant {mutant.name} applied", markup=False)
    sys.stdout.flush()
    launcher = Launcher(spec.root, timeout=timeout)
    with overlay(spec.root, mutant) as where, interruptible():
        job = {"overlay": str(where), "modules": modules, "argv": ["replay", token]}
        try:
            run = launcher.run(job, where, passthrough=sys.stdout, hashseed=decoded.hashseed)
        except BaseException:
            launcher.stop()
            raise
    if run.error is not None:
        raise UsageError(f"mutant {mutant.name}: {run.error}")
    return run.returncode


@click.command("_mutant-run", hidden=True)
@click.argument("job")
def mutant_run_command(job: str) -> None:
    """The child process of ``kelpie-dst mutate`` (see kelpie_dst/mutate/_child.py)."""
    child_main(job)
