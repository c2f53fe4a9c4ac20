"""Where a sweep's seeds run: one interface, three executors.

* :class:`InProcess` runs the items one after the other in this process (``--jobs 1``);
* :class:`LocalPool` runs them on ``jobs`` persistent worker processes on this machine;
* :class:`~kelpie_dst.scenario._dask.DaskCluster` runs them on a Dask distributed cluster
  (``--cluster``);
* :class:`Sharded` restricts any of them to shard ``k/n`` of the items (``--shard``, for CI
  matrices: each job of the matrix runs one shard).

An executor is a context manager (it owns its processes or connection); :meth:`select` says
which items it runs, and :meth:`run` runs them, calling ``record(item, result)`` as results
arrive (in any order) until the items are done or ``should_stop()`` says so. Items are
idempotent: an item whose worker died is run again on another worker, and ``record`` ignores a
second answer for the same item, so no seed is lost or counted twice.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from types import TracebackType
from typing import Any, Protocol

from .._errors import DstError, UsageError
from .._hashseed import current_hashseed
from ._sweep import SeedResult, SweepItem
from ._sweep_worker import run_checked

__all__ = [
    "Executor",
    "InProcess",
    "LocalPool",
    "Record",
    "Sharded",
    "local_executor",
    "lost_worker_result",
]

Record = Callable[[SweepItem, SeedResult], None]
MAX_ATTEMPTS = 3  # an item whose worker dies this many times is reported as a crash


class Executor(Protocol):
    """Runs sweep items somewhere (see the module docstring)."""

    def describe(self) -> str:
        """For the sweep's header line: ``2 local workers``, ``Dask cluster tcp://...``."""

    def select(self, items: Sequence[SweepItem]) -> list[SweepItem]:
        """The items this executor runs (all of them, or a shard's share)."""

    def run(
        self,
        items: Sequence[SweepItem],
        recheck: bool,
        should_stop: Callable[[], bool],
        record: Record,
    ) -> None:
        """Run ``items``; ``record`` each result; stop submitting once ``should_stop()``."""

    def __enter__(self) -> Executor: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def lost_worker_result(item: SweepItem, why: str) -> SeedResult:
    """The result of an item that kept killing its worker process (a crash, exit 3)."""
    return SeedResult(
        scenario=item.ref if item.entry is not None else item.ref.rsplit("/", 1)[-1],
        ref=item.ref,
        overrides=item.overrides,
        seed=item.seed,
        exit_code=3,
        failure_class="crash",
        message=f"the worker process died running this seed {MAX_ATTEMPTS} times: {why}",
        details="",
        trace_hash="",
        virtual_time=0.0,
        events=0,
        faults="",
        faults_fired=(),
        metrics=(),
        hashseed=current_hashseed(),
        entry=item.entry,
    )


class _Base:
    def select(self, items: Sequence[SweepItem]) -> list[SweepItem]:
        return list(items)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


class InProcess(_Base):
    """One item after the other, in this process."""

    def describe(self) -> str:
        return "1 job (this process)"

    def run(
        self,
        items: Sequence[SweepItem],
        recheck: bool,
        should_stop: Callable[[], bool],
        record: Record,
    ) -> None:
        for item in items:
            if should_stop():
                return
            record(item, run_checked(item, recheck))


class Sharded(_Base):
    """Shard ``k`` of ``n`` of the items (items ``k-1, k-1+n, ...``), run by ``inner``."""

    def __init__(self, k: int, n: int, inner: Executor) -> None:
        self.k, self.n, self.inner = k, n, inner

    def describe(self) -> str:
        return f"shard {self.k}/{self.n}, {self.inner.describe()}"

    def select(self, items: Sequence[SweepItem]) -> list[SweepItem]:
        return [i for i in self.inner.select(items) if i.index % self.n == self.k - 1]

    def run(
        self,
        items: Sequence[SweepItem],
        recheck: bool,
        should_stop: Callable[[], bool],
        record: Record,
    ) -> None:
        self.inner.run(items, recheck, should_stop, record)

    def __enter__(self) -> Sharded:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.inner.__exit__(*exc_info)


def local_executor(jobs: int) -> Executor:
    return InProcess() if jobs <= 1 else LocalPool(jobs)


# -- the local pool ----------------------------------------------------------------------------
def _worker_main(conn: Connection, path: list[str], cwd: str) -> None:
    """A worker process: run the items it is sent until it is sent ``None``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    os.chdir(cwd)
    sys.path[:] = path
    parent = os.getppid()
    while True:
        try:
            while not conn.poll(1.0):
                if os.getppid() != parent:  # the parent is gone (even killed): so are we
                    return
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        item, recheck = message
        try:
            answer: tuple[str, Any] = ("ok", run_checked(item, recheck))
        except BaseException as error:  # reported to the parent, which raises it
            answer = ("error", _picklable(error))
        conn.send(answer)


def _picklable(error: BaseException) -> BaseException:
    """A usage error (a scenario that does not load) as it is; anything else, a bug, as a
    DstError carrying the worker's traceback."""
    if isinstance(error, UsageError):
        return error
    text = "".join(traceback.format_exception(error)).rstrip()
    return DstError(f"a sweep worker failed:\n{text}")


class _Worker:
    def __init__(self, context: Any, args: tuple[Any, ...]) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main, args=(child, *args), name="kelpie-dst sweep worker", daemon=True
        )
        self.process.start()
        child.close()
        self.item: SweepItem | None = None


class LocalPool(_Base):
    """``jobs`` persistent worker processes, each running one item at a time.

    Workers are forked from this process when that is safe (no other thread runs), so they
    start with everything the parent imported, at no cost, and run exactly as this process
    would (same hash seed); otherwise they are spawned with ``PYTHONHASHSEED`` pinned to this
    process's (or 0) and import what they need once. A worker that dies is replaced and its
    item re-run (up to :data:`MAX_ATTEMPTS` times).
    """

    def __init__(self, jobs: int, *, hashseed: str | None = None) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {jobs}")
        self.jobs = jobs
        self.hashseed = hashseed  # for spawned workers (default: this process's, or 0)
        self.workers: list[_Worker] = []
        self.method = ""

    def describe(self) -> str:
        return f"{self.jobs} jobs (local worker processes)"

    def _context(self) -> Any:
        fork_ok = (
            "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
        )
        self.method = "fork" if fork_ok else "spawn"
        return multiprocessing.get_context(self.method)

    def _start(self) -> _Worker:
        context = self._context()
        args = (list(sys.path), os.getcwd())
        saved = os.environ.get("PYTHONHASHSEED")
        # read by a spawned interpreter
        os.environ["PYTHONHASHSEED"] = self.hashseed or current_hashseed() or "0"
        # A daemonic process (a Dask worker) may not start children by multiprocessing's rule,
        # which protects children from being orphaned; ours exit when their parent goes.
        config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
        daemonic = config.pop("daemon", None)
        try:
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited from the start
        except ValueError:  # not the main thread
            previous = None
        try:
            return _Worker(context, args)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            if daemonic is not None:
                config["daemon"] = daemonic
            if saved is None:
                os.environ.pop("PYTHONHASHSEED", None)
            else:
                os.environ["PYTHONHASHSEED"] = saved

    def __enter__(self) -> LocalPool:
        if self.workers:
            raise RuntimeError("this LocalPool is already started")  # it would leak workers
        self.workers = [self._start() for _ in range(self.jobs)]
        return self

    def __exit__(self, *exc_info: object) -> None:
        for worker in self.workers:
            if not worker.process.is_alive():
                continue
            if worker.item is not None:  # interrupted mid-seed: nothing to wait for
                worker.process.terminate()
                continue
            try:
                worker.conn.send(None)
            except OSError:
                worker.process.terminate()
        for worker in self.workers:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self.workers = []

    def run(
        self,
        items: Sequence[SweepItem],
        recheck: bool,
        should_stop: Callable[[], bool],
        record: Record,
    ) -> None:
        pending = list(reversed(items))  # pop() takes the next in order
        attempts: dict[int, int] = {}
        while True:
            for worker in self.workers:
                if worker.item is None and pending and not should_stop():
                    worker.item = pending.pop()
                    attempts[worker.item.index] = attempts.get(worker.item.index, 0) + 1
                    worker.conn.send((worker.item, recheck))
            busy = [w for w in self.workers if w.item is not None]
            if not busy:
                return
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for worker in busy:
                item = worker.item
                assert item is not None
                if worker.conn in ready:
                    try:
                        kind, answer = worker.conn.recv()
                    except EOFError:  # died while answering: handled below as a lost worker
                        pass
                    else:
                        worker.item = None
                        if kind == "error":
                            raise answer
                        record(item, answer)
                        continue
                if worker.process.sentinel in ready or not worker.process.is_alive():
                    self._replace(worker, item, attempts, pending, record)

    def _replace(
        self,
        worker: _Worker,
        item: SweepItem,
        attempts: dict[int, int],
        pending: list[SweepItem],
        record: Record,
    ) -> None:
        worker.process.join()
        why = f"exit code {worker.process.exitcode}"
        worker.conn.close()
        index = self.workers.index(worker)
        self.workers[index] = self._start()
        if attempts[item.index] >= MAX_ATTEMPTS:
            record(item, lost_worker_result(item, why))
        else:
            pending.append(item)  # first in line, on whichever worker is free
