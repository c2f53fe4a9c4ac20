"""Starting child processes for the harness and reading their reports.

Each child is ``python -P -m kelpie_dst _mutant-run JOB.json`` with ``PYTHONPATH`` set to the
overlay (if any), then the spec's root, then where this ``kelpie_dst`` lives, then the
inherited ``PYTHONPATH``. ``-P`` keeps the working directory off the front of ``sys.path``, so
the overlay wins even when the command runs from the root of the tree it mutates. Children run
under this process's ``PYTHONHASHSEED`` (or ``"0"``) and scenario search path, so their
replay tokens are the same as a sweep's. A child that reports nothing for ``timeout``
seconds of wall time is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import attrs

from ..scenario import current_hashseed, scenario_dirs
from ._child import EXIT_ORIGIN, MARK

__all__ = ["ChildRun", "Launcher"]


@attrs.frozen
class ChildRun:
    """What one child reported: its seed results (in arrival order) and how it ended."""

    results: tuple[dict[str, Any], ...]
    returncode: int
    error: str | None  # why it did not finish its job (None when it did)
    elapsed: float


class Launcher:
    """Runs children; ``stop()`` kills every live one (Ctrl-C)."""

    def __init__(self, root: Path, *, timeout: float) -> None:
        self.root = root
        self.timeout = timeout
        self._live: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def env(self, overlay: Path | None, hashseed: str | None = None) -> dict[str, str]:
        env = dict(os.environ)
        package_home = str(Path(__file__).resolve().parents[2])  # where kelpie_dst lives
        paths = [str(overlay)] if overlay is not None else []
        paths += [str(self.root), package_home]
        paths += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env["PYTHONHASHSEED"] = hashseed or current_hashseed() or "0"
        env["KELPIE_DST_SCENARIOS"] = os.pathsep.join(str(d.resolve()) for d in scenario_dirs())
        return env

    def run(
        self,
        job: Mapping[str, Any],
        overlay: Path | None,
        *,
        on_result: Callable[[dict[str, Any]], None] | None = None,
        passthrough: IO[str] | None = None,
        hashseed: str | None = None,
    ) -> ChildRun:
        """Run one child to its end. ``passthrough`` receives whatever the child prints
        that is not a report (a replay's output)."""
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="kelpie-mutate-job-") as tmp:
            job_path = Path(tmp) / "job.json"
            job_path.write_text(json.dumps({**job, "root": str(self.root)}))
            stderr_path = Path(tmp) / "stderr"
            with open(stderr_path, "w+") as stderr:
                command = [sys.executable, "-P", "-m", "kelpie_dst", "_mutant-run", str(job_path)]
                with self._lock:
                    if self._stopped:
                        raise KeyboardInterrupt
                    proc = subprocess.Popen(
                        command,
                        stdout=subprocess.PIPE,
                        stderr=stderr,
                        stdin=subprocess.DEVNULL,
                        text=True,
                        env=self.env(overlay, hashseed),
                        start_new_session=True,
                    )
                    self._live.add(proc)
                try:
                    results, error, timed_out = self._read(proc, on_result, passthrough, started)
                finally:
                    with self._lock:
                        self._live.discard(proc)
                stderr.seek(0)
                tail = stderr.read().strip().splitlines()[-15:]
        code = proc.returncode
        if timed_out:
            error = f"no report for {self.timeout:g}s of wall time: the child was killed"
        elif error is None and code not in (0, EXIT_ORIGIN) and not passthrough:
            error = f"the child exited with {code}" + (":\n  " + "\n  ".join(tail) if tail else "")
        return ChildRun(tuple(results), code, error, time.monotonic() - started)

    def _read(
        self,
        proc: subprocess.Popen[str],
        on_result: Callable[[dict[str, Any]], None] | None,
        passthrough: IO[str] | None,
        started: float,
    ) -> tuple[list[dict[str, Any]], str | None, bool]:
        results: list[dict[str, Any]] = []
        error: str | None = None
        last = [time.monotonic()]
        timed_out = threading.Event()
        finished = threading.Event()

        def watch() -> None:
            while not finished.wait(1.0):
                if time.monotonic() - last[0] > self.timeout:
                    timed_out.set()
                    proc.kill()
                    return

        watchdog = threading.Thread(target=watch, name="kelpie-mutate-watchdog", daemon=True)
        watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                last[0] = time.monotonic()
                if not line.startswith(MARK):
                    if passthrough is not None:
                        passthrough.write(line)
                        passthrough.flush()
                    continue
                try:
                    report = json.loads(line[len(MARK) :])
                except ValueError:  # not one of ours after all
                    continue
                if report["type"] == "result":
                    report["received"] = last[0] - started  # wall time since the launch
                    results.append(report)
                    if on_result is not None:
                        on_result(report)
                elif report["type"] == "error":
                    error = str(report["message"])
            proc.wait()
        finally:
            finished.set()
            watchdog.join()
        return results, error, timed_out.is_set()

    def stop(self) -> None:
        """Kill every running child (and whatever it started: its process group)."""
        with self._lock:
            self._stopped = True
            live = list(self._live)
        for proc in live:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
