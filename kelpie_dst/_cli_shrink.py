"""``kelpie-dst shrink SCENARIO --seed N`` (or ``--entry module:function``): minimise a
failing seed's configuration."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from ._cli_common import SEED, check_output, console, interruptible, print_report, set_option
from ._entry import format_duration, parse_duration
from ._errors import UsageError
from ._faults import Fault
from .scenario import Scenario
from .scenario._shrink import ShrinkResult, shrink, shrink_entry
from .scenario._shrink_targets import EntryRun

__all__ = ["shrink_command"]


@click.command("shrink")
@click.argument("scenario", required=False)
@click.option("--entry", default=None, help="package.module:function to shrink instead.")
@click.option("--seed", type=SEED, required=True, help="The failing seed.")
@set_option
@click.option("--strict", is_flag=True, help="--entry: as for run.")
@click.option("--strategy", type=click.Choice(["random", "pct"]), default=None, help="--entry.")
@click.option("--fault", "faults", multiple=True, metavar="TYPE=PROB", help="--entry.")
@click.option("--swarm/--no-swarm", default=None, help="--entry: as for run.")
@click.option("--max-time", default=None, metavar="DURATION", help="--entry: as for run.")
@click.option("--max-runs", type=click.IntRange(min=1), default=300, show_default=True)
@click.option("--time-budget", default=None, metavar="DURATION", help="Stop shrinking after.")
@click.option("--out", "out_path", default=None, metavar="FILE", help="Write the minimal TOML.")
def shrink_command(
    scenario: str | None,
    entry: str | None,
    seed: int,
    sets: tuple[str, ...],
    strict: bool,
    strategy: str | None,
    faults: tuple[str, ...],
    swarm: bool | None,
    max_time: str | None,
    max_runs: int,
    time_budget: str | None,
    out_path: str | None,
) -> None:
    """Delta-debug the faults, nodes, workload sizes and duration of a failing SEED of a
    SCENARIO (or of a plain program, --entry), keeping how it fails; print the minimal
    reproduction, a command that runs it, and the faults that fired last before the failure."""
    if (scenario is None) == (entry is None):
        raise UsageError("shrink takes a SCENARIO or --entry MODULE:FUNCTION (exactly one)")
    budget = parse_duration(time_budget) if time_budget is not None else None

    def step(text: str) -> None:
        console.print(f"  {text}", markup=False)

    if scenario is not None:
        run_flags = strict or strategy or faults or swarm is not None or max_time
        if run_flags:
            raise UsageError("--strict/--strategy/--fault/--swarm/--max-time are for --entry")
        check_output(out_path, "--out")
        console.print(f"kelpie-dst: shrinking scenario {scenario} seed {seed}", markup=False)
        with interruptible():
            result = shrink(
                scenario, seed, sets, max_runs=max_runs, time_budget=budget, on_step=step
            )
        _print(result, out_path)
        return
    assert entry is not None
    if sets or out_path:
        raise UsageError("--set and --out are for scenarios")
    options = {
        "guards": "strict" if strict else "redirect",
        "strategy": strategy or "random",
        "faults": [f"{f.type}={f.probability!r}" for f in map(Fault.parse, faults)],
        "swarm": bool(swarm),
        "max_time": parse_duration(max_time) if max_time is not None else None,
    }
    console.print(f"kelpie-dst: shrinking {entry} seed {seed}", markup=False)
    with interruptible():
        result = shrink_entry(
            entry, seed, options, max_runs=max_runs, time_budget=budget, on_step=step
        )
    _print(result, None)


def _sizes(s: Scenario) -> str:
    return " ".join(f"{k}={s.workload.params[k]}" for k in s.workload.sizes)


def _limit(seconds: float | None) -> str:
    return format_duration(seconds) if seconds is not None else "no limit"


def _print(result: ShrinkResult, out_path: str | None) -> None:
    original, minimal = result.original, result.minimal
    head = f"minimal reproduction ({result.kind.label}) after {result.runs} runs in "
    head += f"{result.elapsed:.1f}s: "
    if isinstance(minimal, EntryRun):
        before = len(original.options["faults"]) if not original.options["swarm"] else None
        line = head + f"faults {before if before is not None else 'swarm'} -> "
        line += f"{len(minimal.options['faults'])}"
        line += f", max time {_limit(original.options['max_time'])} -> "
        line += _limit(minimal.options["max_time"])
    else:
        seed = minimal.seed
        old, new = original.scenario, minimal.scenario
        line = head + f"faults {len(old.faults_for(seed))} -> {len(new.faults_for(seed))}"
        if old.topology.nodes:
            line += f", nodes {len(old.topology.nodes)} -> {len(new.topology.nodes)}"
        if old.workload.sizes:
            line += f", sizes {_sizes(old)} -> {_sizes(new)}"
        line += f", duration {format_duration(old.duration)} -> {format_duration(new.duration)}"
    failed = result.failed_at
    line += f"; fails at t={failed[0]:.3f}s -> t={failed[1]:.3f}s"
    console.print(line, markup=False)
    if result.last_faults:
        console.print("last faults before the failure:", markup=False)
        for moment in result.last_faults:
            console.print(f"  {moment.describe(failed[1])}", markup=False)
    else:
        console.print("no fault fired before the failure", markup=False)
    if isinstance(minimal, EntryRun):
        from ._entry import replay_command  # the run command of an --entry

        command = replay_command(minimal.entry, minimal.seed, minimal.options)
        console.print("run: " + command, markup=False)
        print_report(minimal.result, "replay: " + command)
        return
    toml = result.toml()
    if out_path:
        Path(out_path).write_text(toml)
        console.print(f"wrote {out_path}", markup=False)
    console.print("--- minimal scenario ---", markup=False)
    console.print(toml.rstrip(), markup=False)
    console.print("---", markup=False)
    token = minimal.token()
    if token is not None:
        console.print("run: " + token.run_command(), markup=False)
    if out_path:
        command = shlex.join(["kelpie-dst", "run", out_path, "--seed", str(minimal.seed)])
        console.print("run: " + command, markup=False)
    print_report(minimal.result, minimal.replay_line())
