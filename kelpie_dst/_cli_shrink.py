"""``kelpie-dst shrink SCENARIO --seed N``: minimise a failing seed's configuration."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from ._cli_common import SEED, check_output, console, interruptible, print_report, set_option
from ._entry import format_duration, parse_duration
from .scenario import Scenario
from .scenario._shrink import ShrinkResult, shrink

__all__ = ["shrink_command"]


@click.command("shrink")
@click.argument("scenario")
@click.option("--seed", type=SEED, required=True, help="The failing seed.")
@set_option
@click.option("--max-runs", type=click.IntRange(min=1), default=300, show_default=True)
@click.option("--time-budget", default=None, metavar="DURATION", help="Stop shrinking after.")
@click.option("--out", "out_path", default=None, metavar="FILE", help="Write the minimal TOML.")
def shrink_command(
    scenario: str,
    seed: int,
    sets: tuple[str, ...],
    max_runs: int,
    time_budget: str | None,
    out_path: str | None,
) -> None:
    """Delta-debug the fault plan, workload sizes and duration of a failing SEED, keeping its
    failure class; print the minimal reproduction as a scenario file and a replay command."""
    budget = parse_duration(time_budget) if time_budget is not None else None
    check_output(out_path, "--out")
    console.print(f"kelpie-dst: shrinking scenario {scenario} seed {seed}", markup=False)

    def step(text: str) -> None:
        console.print(f"  {text}", markup=False)

    with interruptible():
        result = shrink(scenario, seed, sets, max_runs=max_runs, time_budget=budget, on_step=step)
    _print(result, out_path)


def _sizes(s: Scenario) -> str:
    return " ".join(f"{k}={s.workload.params[k]}" for k in s.workload.sizes)


def _print(result: ShrinkResult, out_path: str | None) -> None:
    before, after = result.original.scenario, result.minimal.scenario
    seed = result.minimal.seed
    faults_before = len(before.faults_for(seed))
    faults_after = len(after.faults_for(seed))
    line = (
        f"minimal reproduction ({result.kind.label}) after {result.runs} runs in "
        f"{result.elapsed:.1f}s: faults {faults_before} -> {faults_after}"
    )
    if before.workload.sizes:
        line += f", sizes {_sizes(before)} -> {_sizes(after)}"
    line += f", duration {format_duration(before.duration)} -> {format_duration(after.duration)}"
    console.print(line, markup=False)
    toml = result.toml()
    if out_path:
        Path(out_path).write_text(toml)
        console.print(f"wrote {out_path}", markup=False)
    console.print("--- minimal scenario ---", markup=False)
    console.print(toml.rstrip(), markup=False)
    console.print("---", markup=False)
    token = result.minimal.token()
    if token is not None:
        console.print("run: " + token.run_command(), markup=False)
    if out_path:
        command = shlex.join(["kelpie-dst", "run", out_path, "--seed", str(seed)])
        console.print("run: " + command, markup=False)
    print_report(result.minimal.result, result.minimal.replay_line())
