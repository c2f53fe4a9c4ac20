"""``kelpie-dst sweep``: many seeds of scenarios (or a seed corpus), with a progress bar, a
summary table, replay lines for every failure, and JSON/JUnit reports."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._cli_common import console, interruptible, set_option
from ._entry import format_duration, parse_duration
from ._errors import UsageError
from .scenario import load_scenario
from .scenario._corpus import read_corpus
from .scenario._sweep import SeedResult, SweepItem, SweepOutcome, parse_shard, plan, run_items
from .scenario._sweep_output import summary, write_json, write_junit

__all__ = ["sweep_command"]

err_console = Console(stderr=True, highlight=False)


@click.command("sweep")
@click.argument("scenarios", nargs=-1)
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="Seeds per scenario.")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--shard", default=None, metavar="K/N", help="Run only shard K of N.")
@click.option("--json", "json_path", default=None, metavar="FILE", help="Write a JSON report.")
@click.option("--junit", "junit_path", default=None, metavar="FILE", help="Write JUnit XML.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failure.")
@click.option("--time-budget", default=None, metavar="DURATION", help="Stop starting seeds after.")
@click.option(
    "--corpus", "corpora", multiple=True, metavar="DIR", help="Replay a seed corpus (seeds/)."
)
@set_option
def sweep_command(
    scenarios: tuple[str, ...],
    seeds: int | None,
    start: int,
    jobs: int,
    shard: str | None,
    json_path: str | None,
    junit_path: str | None,
    fail_fast: bool,
    time_budget: str | None,
    corpora: tuple[str, ...],
    sets: tuple[str, ...],
) -> None:
    """Run many seeds of each SCENARIO (default: its `seeds` field) and summarise."""
    if not scenarios and not corpora:
        raise UsageError("sweep needs at least one SCENARIO or --corpus DIR")
    budget = parse_duration(time_budget) if time_budget is not None else None
    shard_spec = parse_shard(shard) if shard is not None else None
    work, names = _work(scenarios, corpora, seeds, start, sets)
    items = plan(work, shard_spec)
    where = f", shard {shard}" if shard else ""
    console.print(
        f"kelpie-dst: sweeping {', '.join(names)}: {len(items)} seeds{where}, {jobs} job(s)",
        markup=False,
    )
    sys.stdout.flush()
    outcome = _execute(items, jobs, fail_fast, budget)
    _print_summary(outcome)
    meta: dict[str, Any] = {
        "scenarios": names,
        "seeds": seeds,
        "start": start,
        "shard": shard,
        "jobs": jobs,
        "corpus": list(corpora),
        "overrides": list(sets),
        "items": [[i.ref, list(i.overrides), i.seed] for i in items],
    }
    if json_path:
        write_json(json_path, outcome, meta)
    if junit_path:
        write_junit(junit_path, outcome)
    sys.exit(outcome.exit_code)


def _work(
    refs: Iterable[str],
    corpora: Iterable[str],
    seeds: int | None,
    start: int,
    sets: tuple[str, ...],
) -> tuple[list[tuple[str, tuple[str, ...], Iterable[int]]], list[str]]:
    work: list[tuple[str, tuple[str, ...], Iterable[int]]] = []
    names: list[str] = []
    for ref in refs:
        scenario = load_scenario(ref, sets)  # validates before anything runs
        count = seeds if seeds is not None else scenario.seeds
        work.append((ref, sets, range(start, start + count)))
        names.append(scenario.name)
    for corpus in corpora:
        for entry in read_corpus(corpus):
            overrides = sets + entry.overrides
            try:
                scenario = load_scenario(entry.scenario, overrides)
            except UsageError as error:
                raise UsageError(f"{entry.file}:{entry.line}: {error}") from None
            work.append((entry.scenario, overrides, [entry.seed]))
            if scenario.name not in names:
                names.append(scenario.name)
    return work, names


def _execute(
    items: list[SweepItem], jobs: int, fail_fast: bool, budget: float | None
) -> SweepOutcome:
    progress = Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failures]} failed"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    task = progress.add_task("sweep", total=len(items), failures=0)
    failures = [0]

    def on_result(result: SeedResult) -> None:
        if not result.ok:
            failures[0] += 1
            _print_failure(result, progress.console if err_console.is_terminal else None)
        progress.update(task, advance=1, failures=failures[0])

    with progress, interruptible():
        return run_items(
            items, jobs=jobs, fail_fast=fail_fast, time_budget=budget, on_result=on_result
        )


def _print_failure(result: SeedResult, live: Console | None) -> None:
    label = result.failure_class or "failure"
    first = result.message.splitlines()[0] if result.message else ""
    text = f"FAILED {result.scenario} seed={result.seed}: {label}: {first}\n{result.replay_line()}"
    if live is not None:
        live.print(text, markup=False, highlight=False)
    print(text)
    sys.stdout.flush()


def _print_summary(outcome: SweepOutcome) -> None:
    data = summary(outcome)
    table = Table(title="sweep summary", show_header=False, title_justify="left")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("seeds run", f"{data['seeds_run']} of {data['planned']}")
    table.add_row("passed", str(data["seeds_run"] - data["failures"]))
    for kind in ("invariant", "liveness", "crash", "nondeterminism"):
        table.add_row(f"failures: {kind}", str(data["failures_by_class"].get(kind, 0)))
    for name, count in data["faults_fired"].items():
        table.add_row(f"faults injected: {name}", f"{count:,}")
    table.add_row("events", f"{data['events']:,}")
    table.add_row("events/s", f"{data['events_per_second']:,.0f}")
    table.add_row("virtual time", format_duration(round(data["virtual_seconds"], 3) or 0.001))
    table.add_row("wall time", f"{data['wall_seconds']:.2f}s")
    table.add_row("virtual/wall", f"{data['virtual_to_wall']:,.0f}x")
    table.add_row("seeds/minute", f"{data['seeds_per_minute']:,.0f}")
    if outcome.stopped:
        table.add_row("stopped early", outcome.stopped)
    out = Console(highlight=False, width=max(console.width, 80))
    out.print(table, markup=False)
    failures = outcome.failures
    if failures:
        first = failures[0]
        print(f"{len(failures)} of {len(outcome.results)} seeds failed; first: seed={first.seed}")
    else:
        print(f"all {len(outcome.results)} seeds passed")
