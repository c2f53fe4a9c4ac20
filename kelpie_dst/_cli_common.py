"""Helpers shared by the ``kelpie-dst`` commands: output, failure reports, Ctrl-C, options."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import IO, Any

import click
from rich.console import Console
from rich.markup import escape

from ._result import RunResult

__all__ = [
    "MAX_SEED",
    "SEED",
    "check_output",
    "console",
    "err_console",
    "interruptible",
    "print_report",
    "set_option",
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


console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False)


def set_option(f: Any) -> Any:
    return click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="PATH=VALUE",
        help="Override a scenario field, e.g. --set faults.network.partition.probability=0.2.",
    )(f)


def print_report(result: RunResult, replay: str, out: IO[str] | None = None) -> None:
    """The end of a run's output: faults fired, times, the failure, summary and replay lines
    (docs/cli.md, "Output contract"). Messages are printed verbatim, never as rich markup."""
    if result.faults_fired:
        fired = ", ".join(f"{k}={v}" for k, v in result.faults_fired.items())
        console.print(f"faults fired: {fired}", markup=False)
    wall = max(result.wall_seconds, 1e-9)
    console.print(
        f"virtual time {result.virtual_time:.3f}s in {wall:.3f}s of wall time "
        f"({result.virtual_time / wall:,.0f}x), {result.events} events",
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
        console.print(f"[bold red]{escape(result.failure.describe())}[/]")
        print(result.summary_line())
        print(replay)
    else:
        console.print("[bold green]PASSED[/]")  # the verdict; the summary line stays last
        print(result.summary_line())
    sys.stdout.flush()


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
