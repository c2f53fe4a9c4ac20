"""Helpers shared by the ``kelpie-dst`` commands: output, failure reports, Ctrl-C, options.

Plain lines go through :data:`console` (``print``); rich, which costs a tenth of a second to
import, is loaded only by the commands that draw progress bars or tables (``sweep``).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import IO, Any

import click

from ._entry import format_duration, parse_duration
from ._errors import UsageError
from ._faults import Fault
from ._result import RunResult
from .threads._watchdog import DEFAULT_WATCHDOG

__all__ = [
    "MAX_SEED",
    "REEXEC_ALLOWED",
    "SEED",
    "check_output",
    "console",
    "entry_run_options",
    "interruptible",
    "print_report",
    "profile_option",
    "profiled",
    "run_options",
    "scenario_overrides",
    "set_option",
    "speed_ratio",
    "watchdog_seconds",
]

MAX_SEED = 2**64 - 1


class _Seed(click.ParamType[int]):
    """A seed: a whole number from 0 to MAX_SEED, the same for every command (run, sweep's
    --start, replay tokens, shrink, check-determinism)."""

    name = "seed"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        text = str(value).strip()
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif text.isdigit():
            number = int(text)
        else:
            self.fail(f"a seed is a whole number from 0 to {MAX_SEED}, got {value!r}", param, ctx)
        if not 0 <= number <= MAX_SEED:
            self.fail(f"a seed is a whole number from 0 to {MAX_SEED}, got {number}", param, ctx)
        return number


SEED = _Seed()


def check_output(path: str | None, flag: str) -> None:
    """Refuse an output file that cannot be written, before anything runs: a directory, a
    missing directory, no permission (by creating it, then removing it if it was new)."""
    if path is None:
        return
    from pathlib import Path

    from ._errors import UsageError

    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    parent = target.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: the directory {str(parent)!r} does not exist")
    existed = target.exists()
    try:
        with open(target, "a"):
            pass
    except OSError as error:
        raise UsageError(f"{flag} {path}: cannot write it ({error.strerror})") from None
    if not existed:
        target.unlink()


# Set by the console entry point: an in-process main(argv) (tests) must never re-execute.
REEXEC_ALLOWED = [False]


class _Lines:
    """Plain lines on stdout, printed verbatim (``markup``/``highlight`` are accepted and
    ignored: nothing is ever interpreted as markup)."""

    def print(self, text: str = "", **_: Any) -> None:
        print(text)

    @property
    def width(self) -> int:
        return shutil.get_terminal_size().columns


console = _Lines()


def set_option(f: Any) -> Any:
    return click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="PATH=VALUE",
        help="Override a scenario field, e.g. --set faults.network.partition.probability=0.2.",
    )(f)


def run_options(f: Any, *, entry_required: bool = True) -> Any:
    """``--entry`` and the options of an entry run (also for scenarios: see
    :func:`scenario_overrides`)."""
    options = [
        click.option("--entry", required=entry_required, help="package.module:function to run."),
        click.option("--strict", is_flag=True, help="Fail (exit 4) on wall clock/entropy/threads."),
        click.option(
            "--strategy",
            type=click.Choice(["random", "pct"]),
            default=None,
            help="Scheduling strategy (default: random).",
        ),
        click.option(
            "--fault", "faults", multiple=True, metavar="TYPE=PROB", help="Enable a fault type."
        ),
        click.option(
            "--swarm/--no-swarm",
            default=None,
            help="Let the seed choose a fault profile too (or not).",
        ),
        click.option("--max-time", default=None, metavar="DURATION", help="Virtual time limit."),
        click.option(
            "--watchdog",
            default=None,
            metavar="DURATION",
            help=(
                "Real time a call may block outside the simulation before the run fails "
                f"(exit 2; default: {format_duration(DEFAULT_WATCHDOG)})."
            ),
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def entry_run_options(
    strict: bool,
    strategy: str | None,
    faults: Sequence[str],
    swarm: bool | None,
    max_time: str | None,
    watchdog: str | None = None,
) -> dict[str, Any]:
    """The :func:`kelpie_dst.run` keyword arguments the run options ask for."""
    parsed = [Fault.parse(f) for f in faults]  # validates early, with a one-line error
    options = {
        "guards": "strict" if strict else "redirect",
        "strategy": strategy or "random",
        "faults": [f"{f.type}={f.probability!r}" for f in parsed],
        "swarm": bool(swarm),
        "max_time": parse_duration(max_time) if max_time is not None else None,
    }
    if watchdog is not None:
        options["watchdog"] = watchdog_seconds(watchdog)
    return options


def watchdog_seconds(text: str) -> float:
    """``--watchdog``'s real-time duration in seconds (a one-line usage error if bad)."""
    try:
        return parse_duration(text)
    except UsageError:
        raise UsageError(
            f"bad --watchdog {text!r}: use a positive real-time duration, like 5s or 500ms"
        ) from None


def scenario_overrides(
    sets: Sequence[str],
    strict: bool,
    strategy: str | None,
    faults: Sequence[str],
    swarm: bool | None,
    watchdog: str | None = None,
) -> list[str]:
    """The scenario overrides (``--set``) the run options stand for."""
    overrides = list(sets)
    if strict:
        overrides.append("simulation.guards=strict")
    if strategy is not None:
        overrides.append(f"simulation.strategy={strategy}")
    for fault in faults:
        parsed = Fault.parse(fault)
        overrides.append(f"faults.{parsed.type}.probability={parsed.probability!r}")
    if swarm is not None:
        overrides.append(f"swarm.enabled={str(swarm).lower()}")
    if watchdog is not None:
        overrides.append(f"simulation.watchdog={watchdog_seconds(watchdog)!r}")
    return overrides


def profile_option(f: Any) -> Any:
    return click.option(
        "--profile",
        "profile_path",
        default=None,
        metavar="FILE",
        help="Write a cProfile of the run to FILE (read it with python -m pstats FILE).",
    )(f)


@contextlib.contextmanager
def profiled(path: str | None) -> Iterator[None]:
    """Profile the block with cProfile into ``path`` (nothing without a path). The CLI
    re-executes Python to pin the hash seed, so ``python -m cProfile kelpie-dst`` profiles
    only the launcher; this profiles the run itself."""
    if path is None:
        yield
        return
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        try:
            profile.dump_stats(path)
        except OSError as error:
            raise UsageError(f"--profile {path}: cannot write it: {error.strerror}") from None
        print(f"profile written to {path} (python -m pstats {path})", file=sys.stderr)


def print_report(result: RunResult, replay: str, out: IO[str] | None = None) -> None:
    """The end of a run's output: faults fired, times, the failure, summary and replay lines
    (docs/cli.md, "Output contract"). Messages are printed verbatim, never as rich markup."""
    if result.faults_fired:
        fired = ", ".join(f"{k}={v}" for k, v in result.faults_fired.items())
        console.print(f"faults fired: {fired}", markup=False)
    if result.buggify_fired:
        fired = ", ".join(f"{k}={v}" for k, v in result.buggify_fired.items())
        console.print(f"buggify fired: {fired}", markup=False)
    wall = max(result.wall_seconds, 1e-9)
    console.print(
        f"virtual time {result.virtual_time:.3f}s in {wall:.3f}s of wall time "
        f"({speed_ratio(result.virtual_time / wall)}), {result.events} events",
        markup=False,
    )
    if result.redirected:
        sites = len(result.redirected)
        why = (
            " in guard_allow modules"  # strict: only the allowed modules are redirected
            if result.guards == "strict"
            else "; --strict makes them fail"
        )
        console.print(f"guards redirected {sites} call site(s){why}", markup=False)
    if result.failure is not None:
        click.secho(result.failure.describe(), fg="red", bold=True)
        print(result.summary_line())
        print(replay)
    else:
        click.secho("PASSED", fg="green", bold=True)  # the verdict; the summary line stays last
        print(result.summary_line())
    sys.stdout.flush()


def speed_ratio(ratio: float) -> str:
    """Virtual/wall time as ``1,234x``, ``12x``, ``3.4x`` or ``0.05x`` (never ``0x``)."""
    if ratio >= 10 or ratio == 0:
        return f"{ratio:,.0f}x"
    return f"{ratio:.2g}x"


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Make Ctrl-C end the command with exit 130, even when the interrupt lands inside the
    simulated program (where it would otherwise be reported as a crash).

    A handler of our own (rather than Python's default) also keeps trio from installing its
    KeyboardInterrupt delivery for the guest run.
    """
    hit: list[bool] = []

    def handler(signum: int, frame: object) -> None:
        hit.append(True)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit:
        raise KeyboardInterrupt
