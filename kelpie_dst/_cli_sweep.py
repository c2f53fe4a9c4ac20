"""``kelpie-dst sweep``: many seeds of scenarios, a seed corpus, or a plain ``--entry`` program,
on this machine's cores, a shard of a CI matrix, or a Dask cluster; with a progress display,
a summary table, replay lines for every failure, and JSON/JUnit reports."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import time
from collections.abc import Iterable
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._cli_common import (
    MAX_SEED,
    SEED,
    check_output,
    console,
    entry_run_options,
    interruptible,
    run_options,
    scenario_overrides,
    set_option,
    speed_ratio,
)
from ._entry import format_duration, load_entry, parse_duration
from ._errors import UsageError
from .scenario import load_scenario
from .scenario._corpus import read_corpus
from .scenario._executors import Executor, Sharded, local_executor
from .scenario._loader import MAX_SEEDS
from .scenario._sweep import (
    EntryOptions,
    SeedResult,
    SweepItem,
    SweepOutcome,
    drive,
    parse_shard,
    plan,
)
from .scenario._sweep_output import summary, write_json, write_junit

__all__ = ["default_jobs", "sweep_command"]

ENTRY_SEEDS = 100  # seeds of an --entry sweep without --seeds
PLAIN_PROGRESS_EVERY = 5.0  # seconds between progress lines when stderr is not a terminal
err_console = Console(stderr=True, highlight=False)


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@click.command("sweep")
@click.argument("scenarios", nargs=-1)
@functools.partial(run_options, entry_required=False)
@click.option(
    "--seeds", type=click.IntRange(1, MAX_SEEDS), default=None, help="Seeds per scenario."
)
@click.option("--start", type=SEED, default=0, show_default=True, help="The first seed.")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Local worker processes (default: the number of cores).",
)
@click.option("--shard", default=None, metavar="K/N", help="Run only shard K of N.")
@click.option(
    "--cluster",
    default=None,
    metavar="ADDRESS",
    help="Run the seeds on the Dask scheduler at ADDRESS (tcp://HOST:8786).",
)
@click.option("--json", "json_path", default=None, metavar="FILE", help="Write a JSON report.")
@click.option("--junit", "junit_path", default=None, metavar="FILE", help="Write JUnit XML.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failure.")
@click.option("--time-budget", default=None, metavar="DURATION", help="Stop starting seeds after.")
@click.option(
    "--no-recheck",
    is_flag=True,
    help="Report failures without re-running them in a fresh process first.",
)
@click.option(
    "--corpus", "corpora", multiple=True, metavar="DIR", help="Replay a seed corpus (seeds/)."
)
@set_option
def sweep_command(
    scenarios: tuple[str, ...],
    entry: str | None,
    strict: bool,
    strategy: str | None,
    faults: tuple[str, ...],
    swarm: bool | None,
    max_time: str | None,
    watchdog: str | None,
    seeds: int | None,
    start: int,
    jobs: int | None,
    shard: str | None,
    cluster: str | None,
    json_path: str | None,
    junit_path: str | None,
    fail_fast: bool,
    time_budget: str | None,
    no_recheck: bool,
    corpora: tuple[str, ...],
    sets: tuple[str, ...],
) -> None:
    """Run many seeds of each SCENARIO (default: its `seeds` field), of a --corpus, or of an
    --entry program, and summarise."""
    check_output(json_path, "--json")  # before any seed runs: never lose a sweep's results
    check_output(junit_path, "--junit")
    budget = parse_duration(time_budget) if time_budget is not None else None
    shard_spec = parse_shard(shard) if shard is not None else None
    if cluster is not None and jobs is not None:
        raise UsageError("--jobs is for local workers; a --cluster has its own")
    if entry is not None:
        if scenarios or corpora or sets:
            raise UsageError("sweep takes SCENARIOs/--corpus or --entry, not both")
        options = entry_run_options(strict, strategy, faults, swarm, max_time, watchdog)
        load_entry(entry)  # a one-line error now rather than in every worker
        count = seeds if seeds is not None else ENTRY_SEEDS
        if start + count - 1 > MAX_SEED:
            raise UsageError(f"--start {start}: the seeds would pass {MAX_SEED}, the largest seed")
        items = plan_entry(entry, EntryOptions(**_entry_fields(options)), start, count)
        names = [entry]
    else:
        if not scenarios and not corpora:
            raise UsageError("sweep needs at least one SCENARIO or --corpus DIR, or an --entry")
        if max_time is not None:
            raise UsageError("--max-time is for --entry sweeps; use --set duration=... instead")
        overrides = tuple(scenario_overrides(sets, strict, strategy, faults, swarm, watchdog))
        work, names = _work(scenarios, corpora, seeds, start, overrides)
        items = plan(work)
    if cluster is None and jobs is None:
        jobs = default_jobs()
    executor = _executor(jobs, cluster, shard_spec)
    items = executor.select(items)
    # the executor starts (forks its workers, connects to the cluster) before the progress bar
    # starts its refresh thread: a fork is only safe while no other thread runs
    with interruptible(), executor:
        console.print(
            f"kelpie-dst: sweeping {', '.join(names)}: {len(items)} seeds, {executor.describe()}",
            markup=False,
        )
        sys.stdout.flush()
        outcome = _execute(items, executor, fail_fast, budget, not no_recheck)
    _print_summary(outcome)
    meta: dict[str, Any] = {
        "scenarios": names,
        "seeds": seeds,
        "start": start,
        "shard": shard,
        "jobs": jobs if cluster is None else None,
        "cluster": cluster,
        "executor": executor.describe(),
        "corpus": list(corpora),
        "overrides": list(sets),
        "items": [[i.ref, list(i.overrides), i.seed] for i in items],
    }
    if json_path:
        write_json(json_path, outcome, meta)
    if junit_path:
        write_junit(junit_path, outcome)
    sys.exit(outcome.exit_code)


def _entry_fields(options: dict[str, Any]) -> dict[str, Any]:
    return {**options, "faults": tuple(options["faults"])}


def plan_entry(entry: str, options: EntryOptions, start: int, count: int) -> list[SweepItem]:
    return [SweepItem(i, entry, (), start + i, options) for i in range(count)]


def _executor(jobs: int | None, cluster: str | None, shard: tuple[int, int] | None) -> Executor:
    chosen: Executor
    if cluster is not None:
        from .scenario._dask import DaskCluster

        chosen = DaskCluster(cluster)
    else:
        chosen = local_executor(jobs or 1)
    if shard is not None:
        chosen = Sharded(shard[0], shard[1], chosen)
    return chosen


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
        if start + count - 1 > MAX_SEED:
            raise UsageError(f"--start {start}: the seeds would pass {MAX_SEED}, the largest seed")
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


class _PlainProgress:
    """A progress line on stderr every few seconds, for logs (CI) where a bar cannot be drawn."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.started = self.last = time.monotonic()

    def update(self, done: int, failures: int) -> None:
        now = time.monotonic()
        if now - self.last < PLAIN_PROGRESS_EVERY and done < self.total:
            return
        self.last = now
        elapsed = now - self.started
        rate = done * 60 / max(elapsed, 1e-9)
        print(
            f"sweep: {done}/{self.total} seeds, {failures} failed, {elapsed:.0f}s, "
            f"{rate:,.0f} seeds/min",
            file=sys.stderr,
            flush=True,
        )


def _execute(
    items: list[SweepItem],
    executor: Executor,
    fail_fast: bool,
    budget: float | None,
    recheck: bool,
) -> SweepOutcome:
    live = err_console.is_terminal
    progress = Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failures]} failed"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not live,
    )
    task = progress.add_task("sweep", total=len(items), failures=0)
    plain = None if live else _PlainProgress(len(items))
    counts = [0, 0]  # done, failed

    def on_result(result: SeedResult) -> None:
        counts[0] += 1
        if not result.ok:
            counts[1] += 1
            _print_failure(result, progress.console if live else None)
        progress.update(task, advance=1, failures=counts[1])
        if plain is not None:
            plain.update(counts[0], counts[1])

    # the caller started the executor (forked its workers) before the progress bar starts its
    # refresh thread here: a fork is only safe while no other thread runs
    with progress:
        return drive(
            executor,
            items,
            fail_fast=fail_fast,
            time_budget=budget,
            recheck=recheck,
            on_result=on_result,
        )


def _print_failure(result: SeedResult, live: Console | None) -> None:
    label = result.failure_class or "failure"
    first = result.message.splitlines()[0] if result.message else ""
    lines = [f"FAILED {result.scenario} seed={result.seed}: {label}: {first}"]
    if result.carried_over is not None:
        lines += [f"  {line}" for line in result.details.splitlines()]
    lines.append(result.replay_line())
    text = "\n".join(lines)
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
    table.add_row("virtual/wall", speed_ratio(data["virtual_to_wall"]))
    table.add_row("seeds/minute", f"{data['seeds_per_minute']:,.0f}")
    if outcome.stopped:
        table.add_row("stopped early", outcome.stopped)
    width = max(shutil.get_terminal_size().columns, 80)
    Console(highlight=False, width=width).print(table, markup=False)
    failures = outcome.failures
    if failures:
        first = failures[0]
        print(f"{len(failures)} of {len(outcome.results)} seeds failed; first: seed={first.seed}")
    else:
        print(f"all {len(outcome.results)} seeds passed")
