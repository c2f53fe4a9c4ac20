"""Judging what the ``sandbox_port`` workload saw: pure functions of its records.

Two kinds of record (:mod:`.sandbox_port`):

* :class:`Seen`: one observation the workload compared with its model of the working area
  (a listing, a file's bytes, a command's output or exit code, an error it expected), with
  every answer the contract allows. The model is written from docs/sandbox.md and the
  port's docstrings (``kelpie_agent.sandbox.Sandbox``), never from SimSandbox's code.
* :class:`Timed`: one command run with a timeout (and, maybe, a pause while it ran): when it
  started and ended in trio time, the intervals the sandbox was paused, what came of it.

``sandbox_port_contract`` fails on any :class:`Seen` whose answer is none of the allowed
ones; ``sandbox_timeouts_kept`` fails on a command whose running time (its time in flight
less the time the sandbox was paused) broke its timeout: a command that timed out ran exactly
its timeout, one that finished ran no longer than it, and one whose own work (a ``sleep``)
outlasts its timeout never finishes. Tested on hand-made records in
tests/workloads/test_sandbox_port.py.
"""

from __future__ import annotations

import attrs

__all__ = ["EPSILON", "Seen", "Timed", "check_seen", "check_timed", "running_time"]

EPSILON = 1e-6  # trio time is exact in a simulation; this only absorbs float rounding


@attrs.frozen
class Seen:
    """What the workload saw (``got``), and every answer the contract allows (``allowed``)."""

    box: str
    what: str
    got: object
    allowed: tuple[object, ...]


@attrs.frozen
class Timed:
    """One command with a timeout. ``outcome``: ``ok`` (a result), ``timeout``
    (``ExecTimeoutError``), ``crash`` or ``other`` (not judged). ``work`` is how long the
    command's own sleeping takes (it cannot finish sooner)."""

    box: str
    command: str
    timeout: float
    work: float
    start: float
    end: float
    paused: tuple[tuple[float, float], ...]
    outcome: str


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def check_seen(records: list[Seen]) -> list[str]:
    """Every observation is one of the answers the contract allows."""
    problems = []
    for record in records:
        if record.got in record.allowed:
            continue
        wanted = " or ".join(_short(a) for a in record.allowed)
        problems.append(f"{record.box}: {record.what}: got {_short(record.got)}, not {wanted}")
    return problems


def running_time(record: Timed) -> float:
    """The command's time in flight less the time the sandbox was paused meanwhile."""
    paused = 0.0
    for begin, end in record.paused:
        paused += max(0.0, min(end, record.end) - max(begin, record.start))
    return record.end - record.start - paused


def check_timed(records: list[Timed]) -> list[str]:
    """Timeouts count running time only, and are kept to the tick (docs/sandbox.md)."""
    problems = []
    for record in records:
        ran = running_time(record)
        where = f"{record.box}: {record.command!r} with timeout {record.timeout:g}s"
        pauses = f" ({len(record.paused)} pause(s))" if record.paused else ""
        if record.outcome == "timeout" and abs(ran - record.timeout) > EPSILON:
            problems.append(
                f"{where}: timed out after running {ran:.6f}s{pauses}, not at its timeout"
            )
        elif record.outcome == "ok" and ran > record.timeout + EPSILON:
            problems.append(f"{where}: finished after running {ran:.6f}s{pauses}, past its timeout")
        elif record.outcome == "ok" and record.end - record.start < record.work - EPSILON:
            problems.append(
                f"{where}: finished after {record.end - record.start:.6f}s, before its "
                f"{record.work:g}s of sleep"
            )
    return problems
