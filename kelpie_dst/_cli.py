"""The ``kelpie-dst`` command line (design.md §2, CLI; exit codes in §1.5).

Other tooling depends on these spellings; keep them stable. Usage errors print one line and exit
64; failures print their class, the program's traceback and a ``replay:`` line.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from ._cli_common import (
    REEXEC_ALLOWED,
    SEED,
    check_output,
    entry_run_options,
    interruptible,
    print_report,
    profile_option,
    profiled,
    run_options,
    scenario_overrides,
    set_option,
)
from ._cli_common import console as _console
from ._entry import load_entry, replay_command
from ._errors import UsageError
from ._faults import Fault, FaultPlan, fault_types
from ._run import run as run_simulation
from .threads._watchdog import REPLAY_HINT

__all__ = ["main"]

EXIT_USAGE = 64
# click >= 8.2 raises this (a UsageError) for a bare group invocation; older clicks print help.
_NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _seed_option(f: Any) -> Any:
    return click.option("--seed", type=SEED, default=None, help="The seed (default: random).")(f)


# kept under their old names for other modules of the CLI
_run_options = run_options
_options = entry_run_options


# Commands whose modules load only when they are invoked (or listed by --help), so a plain
# `run --entry` imports neither the scenario machinery nor rich.
_LAZY_COMMANDS = {
    "list": ("._cli_scenario", "list_command"),
    "mutate": ("._cli_mutate", "mutate_command"),
    "_mutant-run": ("._cli_mutate", "mutant_run_command"),
    "replay": ("._cli_scenario", "replay_command"),
    "shrink": ("._cli_shrink", "shrink_command"),
    "sweep": ("._cli_sweep", "sweep_command"),
    "trace": ("._trace_cli", "trace"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = _LAZY_COMMANDS.get(cmd_name)
        if lazy is None:
            return super().get_command(ctx, cmd_name)
        command = getattr(importlib.import_module(lazy[0], __package__), lazy[1])
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kelpie", prog_name="kelpie-dst")
def cli() -> None:
    """Deterministic simulation testing for trio programs."""


@cli.command("run")
@click.argument("scenario", required=False)
@functools.partial(_run_options, entry_required=False)
@_seed_option
@set_option
@click.option("--trace", "trace_path", default=None, metavar="FILE", help="Write the full trace.")
@profile_option
def run_command(
    scenario: str | None,
    entry: str | None,
    strict: bool,
    strategy: str | None,
    faults: tuple[str, ...],
    swarm: bool | None,
    max_time: str | None,
    watchdog: str | None,
    seed: int | None,
    sets: tuple[str, ...],
    trace_path: str | None,
    profile_path: str | None,
) -> None:
    """Run one seed of SCENARIO (a name or a .toml file), or of --entry, an unmodified trio
    program, in the simulator."""
    if (scenario is None) == (entry is None):
        raise UsageError("run takes a SCENARIO or --entry MODULE:FUNCTION (exactly one)")
    check_output(trace_path, "--trace")
    if scenario is not None:
        if max_time is not None:
            raise UsageError("--max-time is for --entry runs; use --set duration=... instead")
        overrides = scenario_overrides(sets, strict, strategy, faults, swarm, watchdog)
        from ._cli_scenario import run_scenario_command

        run_scenario_command(scenario, seed, overrides, trace_path, profile_path)
    assert entry is not None
    if sets:
        raise UsageError("--set is for scenarios; --entry runs take --fault/--swarm/--max-time")
    options = _options(strict, strategy, faults, swarm, max_time, watchdog)
    main_fn = load_entry(entry)
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    _console.print(
        f"kelpie-dst: running {entry} with seed {seed} (strategy {options['strategy']})",
        markup=False,
    )
    profile = FaultPlan(tuple(Fault.parse(f) for f in options["faults"]), options["swarm"])
    chosen = profile.resolve(seed)
    if chosen:
        _console.print(f"faults: {', '.join(f.describe() for f in chosen)}", markup=False)
    replay = replay_command(entry, seed, options)
    REPLAY_HINT[0] = replay  # printed if the watchdog must end the process
    with interruptible(), profiled(profile_path):  # a .gz trace path is written compressed
        result = run_simulation(main_fn, seed=seed, trace_file=trace_path, **options)
    print_report(result, "replay: " + replay)
    sys.exit(result.exit_code)


@cli.command("check-determinism")
@_run_options
@click.option("--seed", type=SEED, required=True, help="The seed to check.")
@click.option(
    "--runs",
    type=click.IntRange(min=2),
    default=4,
    show_default=True,
    help="Runs in all: 2 in this process, the rest each in a fresh process.",
)
@click.option("--vary-hashseed", is_flag=True, help="Give each fresh process its own hash seed.")
def check_determinism_command(
    entry: str,
    strict: bool,
    strategy: str | None,
    faults: tuple[str, ...],
    swarm: bool | None,
    max_time: str | None,
    watchdog: str | None,
    seed: int,
    runs: int,
    vary_hashseed: bool,
) -> None:
    """Run one seed several times (same process and fresh ones) and compare trace hashes."""
    from ._determinism import check_determinism

    options = _options(strict, strategy, faults, swarm, max_time, watchdog)
    report = check_determinism(
        entry, seed=seed, runs=runs, vary_hashseed=vary_hashseed, options=options
    )
    print(report.describe())
    if not report.deterministic:
        print(f"replay: {replay_command(entry, seed, options)}")
        sys.exit(4)


@cli.command("faults")
@click.option("--markdown", is_flag=True, help="Print docs/faults.md-style tables per domain.")
def faults_command(markdown: bool) -> None:
    """List the registered fault types and their parameters."""
    specs = fault_types()
    if markdown:
        _faults_markdown()
        return
    width = max(len(name) for name in specs) + 2
    for name, spec in specs.items():
        params = ", ".join(f"{k}={v:g}" for k, v in spec.params.items())
        print(f"{name:<{width}}{spec.description}" + (f" [{params}]" if params else ""))


def _faults_markdown() -> None:
    domains: dict[str, list[Any]] = {}
    for spec in fault_types().values():
        domains.setdefault(spec.domain, []).append(spec)
    for domain, specs in domains.items():
        print(f"#### `{domain}.*`\n")
        print("| Fault | Effect | Parameters (defaults) | Swarm range | What the code sees |")
        print("|---|---|---|---|---|")
        for spec in specs:
            params = ", ".join(f"`{k}={v:g}`" for k, v in spec.params.items()) or "-"
            low, high = spec.swarm_range
            print(
                f"| `{spec.name}` | {spec.description} | {params} | {low:g}-{high:g} "
                f"| {spec.observed or '-'} |"
            )
        print()


@cli.command("_worker", hidden=True)
@click.option("--entry", required=True)
@click.option("--seed", type=SEED, required=True)
@click.option("--options", "options_json", required=True)
@click.option("--trace-out", required=True)
def worker_command(entry: str, seed: int, options_json: str, trace_out: str) -> None:
    """One perturbed run for check-determinism; prints its result as JSON."""
    _perturb()
    main_fn = load_entry(entry)
    with open(trace_out, "wb") as trace_file:
        result = run_simulation(
            main_fn, seed=seed, trace_file=trace_file, **json.loads(options_json)
        )
    failure = None
    if result.failure is not None:
        failure = [int(result.failure.kind), result.failure.message]
    print(
        json.dumps(
            {
                "seed": result.seed,
                "trace_hash": result.trace_hash,
                "virtual_time": result.virtual_time,
                "events": result.events,
                "failure": failure,
            }
        )
    )


_noise: list[object] = []


def _perturb() -> None:
    """Shift allocations and timing so that address- or timing-dependent code diverges."""
    noise = int(os.environ.get("KELPIE_DST_NOISE", "0"))
    rng = random.Random(noise * 104729 + os.getpid())  # noqa: S311  (meant to vary)
    for _ in range(rng.randrange(100, 5000)):
        _noise.append(bytes(rng.randrange(1, 200)) if rng.random() < 0.5 else {"k": rng.random()})
    time.sleep(rng.random() * 0.02)


def _usage_error(message: str) -> NoReturn:
    print(f"kelpie-dst: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def _pin_hashseed() -> None:
    """Re-execute with PYTHONHASHSEED pinned, so runs match across processes (design.md §1.2)."""
    if os.environ.get("KELPIE_DST_NO_REEXEC") == "1":
        return
    if os.environ.get("PYTHONHASHSEED", "random") in ("", "random"):
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, "-m", "kelpie_dst", *sys.argv[1:]], env)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: maps usage errors to one line and exit 64, Ctrl-C to exit 130."""
    if argv is None:
        _pin_hashseed()
    REEXEC_ALLOWED[0] = argv is None
    try:
        cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="kelpie-dst",
            standalone_mode=False,
        )
    except UsageError as error:
        _usage_error(str(error))
    except _NO_ARGS_IS_HELP as error:
        assert error.ctx is not None
        print(error.ctx.get_help())
        sys.exit(0)
    except click.UsageError as error:
        _usage_error(error.format_message().replace("\n", " "))
    except click.exceptions.Exit as error:
        sys.exit(error.exit_code)
    except (click.Abort, KeyboardInterrupt):
        print("kelpie-dst: interrupted", file=sys.stderr)
        if argv is None:
            # An interrupt can leave a half-stepped simulation behind, whose coroutines
            # complain ("Exception ignored in ...") when the interpreter finalises them.
            sys.unraisablehook = lambda _: None
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
