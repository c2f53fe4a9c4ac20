"""``kelpie-dst run SCENARIO``, ``replay`` and ``list``."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from ._cli_common import (
    REEXEC_ALLOWED,
    check_output,
    console,
    interruptible,
    print_report,
    profiled,
)
from ._errors import UsageError
from .scenario import (
    ReplayToken,
    ScenarioRun,
    current_hashseed,
    describe_faults,
    load_scenario,
    run_scenario,
    scenario_dirs,
    scenario_files,
)
from .scenario._model import Scenario

__all__ = ["list_command", "replay_command", "run_scenario_command"]


def _announce(scenario: Scenario, seed: int, verb: str = "running") -> None:
    console.print(
        f"kelpie-dst: {verb} scenario {scenario.name} ({scenario.path}) with seed {seed} "
        f"(strategy {scenario.simulation.strategy})",
        markup=False,
    )
    if scenario.overrides:
        console.print("overrides: " + " ".join(scenario.overrides), markup=False)
    console.print(scenario.describe_plan(), markup=False)
    intensity = scenario.intensity(seed)
    if intensity is not None:
        console.print(f"swarm intensity: {intensity.describe()}", markup=False)
    explicit, swarm = scenario.resolve_faults(seed)
    console.print(describe_faults(explicit, swarm), markup=False)
    sys.stdout.flush()


def _run(
    scenario: Scenario, seed: int, trace_path: str | None, profile_path: str | None = None
) -> ScenarioRun:
    with interruptible(), profiled(profile_path):  # a .gz trace path is written compressed
        return run_scenario(scenario, seed, trace_file=trace_path)


def _metrics(run: ScenarioRun) -> None:
    if run.metrics:
        text = ", ".join(f"{k}={v:g}" for k, v in run.metrics.items())
        console.print(f"metrics: {text}", markup=False)


def run_scenario_command(
    ref: str,
    seed: int | None,
    overrides: Sequence[str],
    trace_path: str | None,
    profile_path: str | None = None,
) -> NoReturn:
    scenario = load_scenario(ref, overrides)
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    _announce(scenario, seed)
    run = _run(scenario, seed, trace_path, profile_path)
    _metrics(run)
    print_report(run.result, run.replay_line())
    sys.exit(run.exit_code)


@click.command("replay")
@click.argument("token")
@click.option("--trace", "trace_path", default=None, metavar="FILE", help="Write the full trace.")
def replay_command(token: str, trace_path: str | None) -> None:
    """Replay a failure from its TOKEN and check that its trace hash is the same."""
    check_output(trace_path, "--trace")
    decoded = ReplayToken.decode(token)
    hashseed = current_hashseed()
    if hashseed != decoded.hashseed:
        _reexec_with_hashseed(decoded.hashseed)
    scenario = load_scenario(decoded.scenario, decoded.overrides)
    _announce(scenario, decoded.seed, verb="replaying")
    run = _run(scenario, decoded.seed, trace_path)
    _metrics(run)
    mismatch = decoded.trace_hash is not None and run.result.trace_hash != decoded.trace_hash
    if mismatch:
        console.print(
            f"NONDETERMINISM: the replay's trace hash {run.result.trace_hash} differs from the "
            f"recorded {decoded.trace_hash}: the run did not reproduce (the run is "
            f"nondeterministic, or the code changed since the token was made)",
            markup=False,
        )
    elif decoded.trace_hash is not None:
        console.print(f"reproduced: same trace hash {decoded.trace_hash}", markup=False)
    print_report(run.result, decoded.replay_line())
    sys.exit(4 if mismatch else run.exit_code)


def _reexec_with_hashseed(hashseed: str) -> NoReturn:
    if not REEXEC_ALLOWED[0] or os.environ.get("KELPIE_DST_REPLAY_HASHSEED") == hashseed:
        raise UsageError(
            f"this token was recorded under PYTHONHASHSEED={hashseed}; run the replay "
            f"with PYTHONHASHSEED={hashseed}"
        )
    env = dict(os.environ, PYTHONHASHSEED=hashseed, KELPIE_DST_REPLAY_HASHSEED=hashseed)
    os.execve(sys.executable, [sys.executable, "-m", "kelpie_dst", *sys.argv[1:]], env)


@click.command("list")
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Look in this directory instead of the search path (repeatable).",
)
def list_command(paths: tuple[str, ...]) -> None:
    """List the scenarios: name, default seeds, description and file."""
    from pathlib import Path

    dirs = [Path(p) for p in paths] if paths else scenario_dirs()
    for directory in dirs:
        if not directory.is_dir():
            raise UsageError(f"--path {directory}: no such directory")
    files = scenario_files(dirs)
    if not files:
        print("no scenarios found in " + ", ".join(str(d) for d in dirs))
        return
    rows = []
    for file in files:
        try:
            scenario = load_scenario(str(file))
            rows.append((scenario.name, str(scenario.seeds), _first_sentence(scenario.description)))
        except UsageError as error:
            rows.append((file.stem, "-", f"INVALID: {error}"))
    width = max(len(r[0]) for r in rows)
    print(f"{'NAME':<{width}}  SEEDS  DESCRIPTION")
    for name, seeds, description in rows:
        print(f"{name:<{width}}  {seeds:>5}  {description}")


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]
