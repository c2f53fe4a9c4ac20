"""The Dask executor: a sweep's seeds on a Dask distributed cluster (``--cluster``).

Each item is one task (:func:`run_isolated`, by reference: every worker needs the same kelpie
and the program under test). The task runs the seed in a child process of the Dask worker (one
per worker thread, started on first use and kept), never in the worker itself: the worker's own
threads (its event loop, heartbeats) draw from the global ``random`` module, which a simulation
seeds and digests, so a seed run beside them does not replay. Dask reschedules the tasks of
a worker that dies on another worker; a task that has killed as many workers as the
scheduler's ``distributed.scheduler.allowed-failures`` (3 by default) is reported as a crash.
Results are recorded once per item whatever happens, so no seed is lost or counted twice.

Workers must hash strings as this process does (the same ``PYTHONHASHSEED`` at interpreter
start), since string hashing orders sets: checked at the start by hashing a probe string on
each worker, because a worker's environment can say otherwise (Dask's nanny starts workers
under ``PYTHONHASHSEED=6640`` whatever it is told). Needs ``pip install 'kelpie[cluster]'``.
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import UsageError
from .._hashseed import current_hashseed
from ._executors import LocalPool, Record, lost_worker_result
from ._sweep import SeedResult, SweepItem

__all__ = ["DaskCluster"]

_RUN_IDS = itertools.count()


_PROBE = "kelpie-dst: hash seed probe"
_LOCAL = threading.local()  # a Dask worker thread's child process (a LocalPool of one)


def run_isolated(item: SweepItem, recheck: bool, hashseed: str) -> SeedResult:
    """The Dask task: run ``item`` in this worker thread's child process, under ``hashseed``."""
    pool: LocalPool | None = getattr(_LOCAL, "pool", None)
    if pool is None or pool.hashseed != hashseed:
        if pool is not None:
            pool.__exit__(None, None, None)
        pool = _LOCAL.pool = LocalPool(1, hashseed=hashseed).__enter__()
        atexit.register(pool.__exit__, None, None, None)
    results: list[SeedResult] = []
    pool.run([item], recheck, lambda: False, lambda _, result: results.append(result))
    return results[0]


def _probe_hash() -> int:
    return hash(_PROBE)


class DaskCluster:
    """Runs items on the Dask scheduler at ``address`` (``tcp://host:8786``)."""

    def __init__(self, address: str, *, connect_timeout: float = 30.0) -> None:
        self.address = address
        self.connect_timeout = connect_timeout
        self.client: Any = None
        self.threads = 0

    def describe(self) -> str:
        return f"Dask cluster {self.address} ({self.threads} worker thread(s))"

    def select(self, items: Sequence[SweepItem]) -> list[SweepItem]:
        return list(items)

    def __enter__(self) -> DaskCluster:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError(
                "--cluster needs Dask distributed: pip install 'kelpie[cluster]'"
            ) from None
        try:
            self.client = Client(
                self.address,
                timeout=self.connect_timeout,
                set_as_default=False,
            )
        except (OSError, TimeoutError) as error:
            raise UsageError(f"--cluster {self.address}: cannot connect: {error}") from None
        try:
            self._check_workers()
        except BaseException:
            self.client.close()
            raise
        return self

    def _check_workers(self) -> None:
        threads = self.client.nthreads()
        if not threads:
            raise UsageError(f"--cluster {self.address}: the scheduler has no workers")
        self.threads = sum(threads.values())
        ours = current_hashseed()
        if ours is None:
            raise UsageError(
                "--cluster: this process runs under a random PYTHONHASHSEED; run the sweep "
                "with PYTHONHASHSEED set (the kelpie-dst command sets 0)"
            )
        probes = self.client.run(_probe_hash)
        wrong = sorted(w for w, value in probes.items() if value != _probe_hash())
        if wrong:
            raise UsageError(
                f"--cluster {self.address}: worker {wrong[0]} does not run under "
                f"PYTHONHASHSEED={ours} as this sweep does; start the workers with "
                f"PYTHONHASHSEED={ours} and --no-nanny (Dask's nanny pins its own), or run the "
                f"sweep under theirs (docs/sweeps.md)"
            )

    def __exit__(self, *exc_info: object) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def run(
        self,
        items: Sequence[SweepItem],
        recheck: bool,
        should_stop: Callable[[], bool],
        record: Record,
    ) -> None:
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        client = self.client
        hashseed = current_hashseed()  # the workers' too (checked on entering)
        prefix = f"kelpie-dst-{os.getpid()}-{next(_RUN_IDS)}"
        window = max(2, 2 * self.threads)
        pending = iter(items)
        by_key: dict[str, SweepItem] = {}

        def submit() -> Any | None:
            item = next(pending, None)
            if item is None or should_stop():
                return None
            key = f"{prefix}-{item.index}"
            by_key[key] = item
            # retries=0: Dask re-runs a task whose worker died by itself (allowed-failures);
            # an exception raised by the seed is an answer, not a reason to run it again
            return client.submit(
                run_isolated, item, recheck, hashseed, key=key, pure=False, retries=0
            )

        first = [f for f in (submit() for _ in range(window)) if f is not None]
        running = as_completed(first, loop=client.loop)
        try:
            for future in running:
                item = by_key[future.key]
                if future.status == "error":
                    error = future.exception()
                    if not isinstance(error, KilledWorker):
                        raise error
                    record(item, lost_worker_result(item, f"Dask: {error}"))
                else:
                    record(item, future.result())
                follow = submit()
                if follow is not None:
                    running.add(follow)
        finally:
            leftover = [f for f in running.futures if not f.done()]
            if leftover:
                client.cancel(leftover)
