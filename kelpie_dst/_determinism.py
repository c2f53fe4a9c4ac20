"""Determinism checks: run one seed several times and compare trace hashes.

Runs 1 and 2 happen in this process (the repeat catches state leaking between runs, such as
lazily imported modules drawing from ``random``). Further runs happen in fresh processes, each
perturbed: extra allocations (which move object addresses, and so the order of sets of objects),
a padded environment, a short real delay, and, with ``vary_hashseed``, a different
``PYTHONHASHSEED`` (which changes the order of sets of strings). When hashes differ, the report
names the first divergent event from each side.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ._entry import entry_name, load_entry
from ._errors import FailureKind, NondeterminismError, ScenarioFailed, UsageError
from ._result import Failure, RunResult
from ._run import run
from ._trace import Divergence, Event, decode_trace, first_divergence, read_trace

__all__ = ["DeterminismReport", "assert_deterministic", "check_determinism"]


@attrs.frozen
class DeterminismReport:
    """Hashes of every run of one seed, and the first divergence if they differ."""

    seed: int
    runs: tuple[tuple[str, str], ...]  # (label, trace hash)
    divergence: Divergence | None = None
    divergent_runs: tuple[str, str] | None = None
    failure: str | None = None
    first_failure: Failure | None = None  # the first run's failure (None if it passed)

    @property
    def deterministic(self) -> bool:
        return len({h for _, h in self.runs}) == 1

    def describe(self) -> str:
        lines = [f"  {label}: {h}" for label, h in self.runs]
        if self.deterministic:
            head = f"deterministic: seed={self.seed} trace_hash={self.runs[0][1]}"
        else:
            head = (
                f"NONDETERMINISTIC: seed={self.seed} gave {len({h for _, h in self.runs})} hashes"
            )
        text = "\n".join([head, *lines])
        if self.divergence is not None and self.divergent_runs is not None:
            text += "\n" + self.divergence.describe(*self.divergent_runs)
        if self.failure:
            text += f"\nnote: every run failed the same way: {self.failure}"
        return text


def check_determinism(
    entry: str | Callable[..., Awaitable[Any]],
    *,
    seed: int,
    runs: int = 4,
    vary_hashseed: bool = False,
    options: Mapping[str, Any] | None = None,
    save_traces: str | os.PathLike[str] | None = None,
) -> DeterminismReport:
    """Run ``entry`` ``runs`` times (at least 2; by default 4: two in this process, two in
    fresh processes) and compare the traces.

    ``entry`` is ``"module:function"`` or the function itself. Runs after the second happen in
    fresh processes, which need the function to be importable by name. ``options`` are keyword
    arguments for :func:`kelpie_dst.run` (JSON-serializable ones). With ``save_traces``, each
    run's trace is kept in that directory as ``run<N>.trace``, for ``kelpie-dst trace diff``.
    """
    if runs < 2:
        raise UsageError("--runs must be at least 2")
    options = dict(options or {})
    if isinstance(entry, str):
        main = load_entry(entry)
    else:
        main = entry
        name = entry_name(entry)
        if name is None and runs > 2:
            raise UsageError(
                f"{getattr(entry, '__qualname__', entry)!r} cannot be imported by name, so it "
                "cannot run in a fresh process; use a module-level function or runs=2"
            )
        entry = name or ""
    recorded: list[tuple[str, RunResult, list[Event] | Path]] = []
    keep = Path(save_traces) if save_traces is not None else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    for label in ("in-process", "in-process repeat"):
        in_process, data = _run_recorded(main, seed, options)
        if keep is not None:
            (keep / f"run{len(recorded) + 1}.trace").write_bytes(data)
        recorded.append((label, in_process, list(decode_trace(data))))
        if len(recorded) == runs:
            break
    with tempfile.TemporaryDirectory(prefix="kelpie-dst-") as tmp:
        for index in range(len(recorded), runs):
            path = (keep or Path(tmp)) / f"run{index + 1}.trace"
            label = f"fresh process {index - 1}"
            fresh = _run_fresh(entry, seed, options, path, index, vary_hashseed)
            if vary_hashseed:
                label += f" (PYTHONHASHSEED={_hashseed(index)})"
            recorded.append((label, fresh, path))
        hashes = tuple((label, result.trace_hash) for label, result, _ in recorded)
        failures = {r.failure.message if r.failure else None for _, r, _ in recorded}
        failure = next(iter(failures)) if len(failures) == 1 else None
        first_label, first_result, first_events = recorded[0]
        for label, result, events in recorded[1:]:
            if result.trace_hash != first_result.trace_hash:
                divergence = first_divergence(_events(first_events), _events(events))
                return DeterminismReport(
                    seed, hashes, divergence, (first_label, label), failure, first_result.failure
                )
        return DeterminismReport(seed, hashes, failure=failure, first_failure=first_result.failure)


def assert_deterministic(
    main: str | Callable[..., Awaitable[Any]],
    *,
    seeds: Iterable[int] = (0,),
    runs: int = 3,
    vary_hashseed: bool = False,
    expect_failure: bool | str = False,
    **options: Any,
) -> None:
    """For tests: raise :class:`NondeterminismError` naming the first divergent event if any
    seed's runs differ, and :class:`ScenarioFailed` if a seed's runs failed (the same way).
    ``options`` are :func:`kelpie_dst.run` keyword arguments.

    A test that checks a failing seed replays deterministically passes ``expect_failure=True``
    (every seed must then fail), or a string that the failure message must contain.

    The default, ``runs=3``, starts one fresh process per seed (about a second each), to keep
    test suites fast; ``check_determinism`` and the CLI default to two."""
    for seed in seeds:
        report = check_determinism(
            main, seed=seed, runs=runs, vary_hashseed=vary_hashseed, options=options
        )
        if not report.deterministic:
            raise NondeterminismError(report.describe())
        _check_outcome(report, expect_failure)


def _check_outcome(report: DeterminismReport, expect_failure: bool | str) -> None:
    failure = report.first_failure
    if failure is None:
        if expect_failure is not False:
            wanted = "" if expect_failure is True else f" containing {expect_failure!r}"
            raise ScenarioFailed(
                f"seed={report.seed} passed in every run, but a failure{wanted} was expected "
                f"(trace_hash={report.runs[0][1]})"
            )
        return
    if expect_failure is True:
        return
    if isinstance(expect_failure, str) and expect_failure in failure.message:
        return
    what = f"{failure.kind.label}: {failure.message}"
    if isinstance(expect_failure, str):
        raise ScenarioFailed(
            f"seed={report.seed} failed in every run, but not with {expect_failure!r}: {what}"
        )
    detail = f"\n{failure.details}" if failure.details else ""
    raise ScenarioFailed(
        f"seed={report.seed} failed in every run ({what}); pass expect_failure=True if that "
        f"failure is what the test checks{detail}"
    )


def _events(source: list[Event] | Path) -> list[Event]:
    return source if isinstance(source, list) else list(read_trace(source))


def _run_recorded(main: Any, seed: int, options: Mapping[str, Any]) -> tuple[RunResult, bytes]:
    sink = io.BytesIO()
    result = run(main, seed=seed, trace_file=sink, **options)
    return result, sink.getvalue()


def _hashseed(index: int) -> int:
    return 1 + (index * 7919) % 4_000_000_000


def _run_fresh(
    entry: str,
    seed: int,
    options: Mapping[str, Any],
    trace_path: Path,
    index: int,
    vary_hashseed: bool,
) -> RunResult:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = (
        str(_hashseed(index)) if vary_hashseed else env.get("PYTHONHASHSEED", "0")
    )
    env["KELPIE_DST_NOISE"] = str(index)
    env["KELPIE_DST_PAD"] = "x" * (97 * index % 4096)
    env["KELPIE_DST_NO_REEXEC"] = "1"
    env.setdefault("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env["PYTHONPATH"]) if p)
    command = [
        sys.executable,
        "-m",
        "kelpie_dst",
        "_worker",
        "--entry",
        entry,
        "--seed",
        str(seed),
        "--options",
        json.dumps(dict(options)),
        "--trace-out",
        str(trace_path),
    ]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UsageError(
            f"fresh-process run failed to start: {proc.stderr.strip().splitlines()[-1:]}"
        )
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    failure = None
    if data["failure"] is not None:
        kind, message = data["failure"]
        failure = Failure(FailureKind(kind), message)
    return RunResult(
        seed=data["seed"],
        trace_hash=data["trace_hash"],
        virtual_time=data["virtual_time"],
        events=data["events"],
        failure=failure,
    )
