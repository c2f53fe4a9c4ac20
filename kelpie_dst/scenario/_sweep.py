"""Sweeps: many seeds of one or more scenarios, in this process or in worker processes.

The work is a list of :class:`SweepItem` (scenario, overrides, seed) in a fixed order; a shard
``k/n`` takes items ``k-1, k-1+n, ...`` of that order, so the shards of one sweep partition it.
With ``jobs > 1`` the items run in spawned worker processes with ``PYTHONHASHSEED`` pinned;
each seed's result depends only on the seed and the scenario, so the results equal those of
``jobs=1`` (only wall times differ). ``fail_fast`` and ``time_budget`` stop submitting work.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._errors import UsageError
from ._loader import load_scenario
from ._model import Scenario
from ._runtime import ScenarioRun, describe_faults, run_scenario
from ._token import ReplayToken, current_hashseed

__all__ = ["SeedResult", "SweepItem", "SweepOutcome", "parse_shard", "plan", "run_items"]


@attrs.frozen
class SweepItem:
    index: int
    ref: str
    overrides: tuple[str, ...]
    seed: int


@attrs.frozen
class SeedResult:
    """One seed's outcome, in plain data (it crosses process boundaries and goes to JSON)."""

    scenario: str
    ref: str
    overrides: tuple[str, ...]
    seed: int
    exit_code: int
    failure_class: str | None
    message: str
    details: str
    trace_hash: str
    virtual_time: float
    events: int
    faults: str
    faults_fired: tuple[tuple[str, int], ...]
    metrics: tuple[tuple[str, float], ...]
    hashseed: str | None
    wall_seconds: float = attrs.field(default=0.0, eq=False)

    @classmethod
    def from_run(cls, run: ScenarioRun) -> SeedResult:
        result, failure = run.result, run.result.failure
        return cls(
            scenario=run.scenario.name,
            ref=run.scenario.ref,
            overrides=run.scenario.overrides,
            seed=run.seed,
            exit_code=result.exit_code,
            failure_class=failure.kind.name.lower() if failure else None,
            message=failure.message if failure else "",
            details=failure.details if failure else "",
            trace_hash=result.trace_hash,
            virtual_time=result.virtual_time,
            events=result.events,
            faults=describe_faults(run.explicit_faults, run.swarm_faults),
            faults_fired=tuple(sorted(result.faults_fired.items())),
            metrics=tuple(sorted(run.metrics.items())),
            hashseed=run.hashseed,
            wall_seconds=result.wall_seconds,
        )

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def token(self) -> ReplayToken | None:
        if self.hashseed is None:
            return None
        return ReplayToken(self.ref, self.seed, self.overrides, self.trace_hash, self.hashseed)

    def replay_line(self) -> str:
        token = self.token()
        if token is None:
            return "replay: unavailable: the seed ran under a random PYTHONHASHSEED"
        return token.replay_line()

    def to_json(self) -> dict[str, Any]:
        token = self.token()
        return {
            "scenario": self.scenario,
            "ref": self.ref,
            "overrides": list(self.overrides),
            "seed": self.seed,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "failure_class": self.failure_class,
            "message": self.message,
            "details": self.details,
            "trace_hash": self.trace_hash,
            "virtual_time": self.virtual_time,
            "events": self.events,
            "faults": self.faults,
            "faults_fired": dict(self.faults_fired),
            "metrics": dict(self.metrics),
            "hashseed": self.hashseed,
            "wall_seconds": self.wall_seconds,
            "replay": f"kelpie-dst replay {token.encode()}" if token else None,
        }


@attrs.frozen
class SweepOutcome:
    planned: int
    results: tuple[SeedResult, ...]
    elapsed: float
    stopped: str | None = None  # "fail-fast" or "time budget"

    @property
    def failures(self) -> tuple[SeedResult, ...]:
        return tuple(r for r in self.results if not r.ok)

    @property
    def exit_code(self) -> int:
        """The class of the first failure in sweep order, or 0."""
        failures = self.failures
        return failures[0].exit_code if failures else 0


def parse_shard(text: str) -> tuple[int, int]:
    """``k/n`` with ``1 <= k <= n``."""
    k, sep, n = text.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit():
        raise UsageError(f"--shard takes K/N, like 1/4, got {text!r}")
    shard, total = int(k), int(n)
    if not 1 <= shard <= total:
        raise UsageError(f"--shard {text}: K must be between 1 and N")
    return shard, total


def plan(
    work: Iterable[tuple[str, tuple[str, ...], Iterable[int]]],
    shard: tuple[int, int] | None = None,
) -> list[SweepItem]:
    """Items for ``(ref, overrides, seeds)`` groups, in order, then this shard's share."""
    items: list[SweepItem] = []
    for ref, overrides, seeds in work:
        for seed in seeds:
            items.append(SweepItem(len(items), ref, overrides, seed))
    if shard is None:
        return items
    k, n = shard
    return [item for item in items if item.index % n == k - 1]


_CACHE: dict[tuple[str, tuple[str, ...]], Scenario] = {}


def run_item(item: SweepItem) -> SeedResult:
    key = (item.ref, item.overrides)
    scenario = _CACHE.get(key)
    if scenario is None:
        scenario = _CACHE[key] = load_scenario(item.ref, item.overrides)
    return SeedResult.from_run(run_scenario(scenario, item.seed))


def _init_worker(path: list[str], cwd: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    os.chdir(cwd)
    sys.path[:] = path


def _answer(
    answers: queue.SimpleQueue[tuple[SweepItem, SeedResult | BaseException]],
    item: SweepItem,
    answer: SeedResult | BaseException,
) -> None:
    answers.put((item, answer))


def run_items(
    items: Sequence[SweepItem],
    *,
    jobs: int = 1,
    fail_fast: bool = False,
    time_budget: float | None = None,
    on_result: Callable[[SeedResult], None] | None = None,
) -> SweepOutcome:
    """Run ``items``; results come back in item order whatever ``jobs`` is."""
    start = time.monotonic()
    done: dict[int, SeedResult] = {}
    stopped: list[str] = []

    def should_stop() -> bool:
        if fail_fast and any(not r.ok for r in done.values()):
            stopped[:] = ["fail-fast"]
        elif time_budget is not None and time.monotonic() - start >= time_budget:
            stopped[:] = ["time budget"]
        return bool(stopped)

    def record(item: SweepItem, result: SeedResult) -> None:
        done[item.index] = result
        if on_result is not None:
            on_result(result)

    if jobs <= 1:
        for item in items:
            if should_stop():
                break
            record(item, run_item(item))
    else:
        _run_parallel(items, jobs, should_stop, record)
    ordered = tuple(done[i.index] for i in items if i.index in done)
    elapsed = time.monotonic() - start
    return SweepOutcome(len(items), ordered, elapsed, stopped[0] if stopped else None)


def _spawn_pool(context: Any, jobs: int) -> Any:
    """A pool of spawned workers that ignore SIGINT from their first instruction (an ignored
    disposition survives exec, and Python keeps it), so Ctrl-C reaches only the parent."""
    args = (list(sys.path), os.getcwd())
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        return context.Pool(jobs, _init_worker, args)
    try:
        return context.Pool(jobs, _init_worker, args)
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_parallel(
    items: Sequence[SweepItem],
    jobs: int,
    should_stop: Callable[[], bool],
    record: Callable[[SweepItem, SeedResult], None],
) -> None:
    hashseed = current_hashseed() or "0"
    saved = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = hashseed  # read by each spawned interpreter at startup
    try:
        context = multiprocessing.get_context("spawn")
        answers: queue.SimpleQueue[tuple[SweepItem, SeedResult | BaseException]] = (
            queue.SimpleQueue()
        )
        with _spawn_pool(context, jobs) as pool:
            pending = iter(items)
            in_flight = 0
            while True:
                while in_flight < 2 * jobs and not should_stop():
                    item = next(pending, None)
                    if item is None:
                        break
                    pool.apply_async(
                        run_item,
                        (item,),
                        callback=functools.partial(_answer, answers, item),
                        error_callback=functools.partial(_answer, answers, item),
                    )
                    in_flight += 1
                if in_flight == 0:
                    break
                item, answer = answers.get()
                in_flight -= 1
                if isinstance(answer, BaseException):
                    raise answer
                record(item, answer)
    finally:
        if saved is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = saved


def totals(results: Iterable[SeedResult]) -> Mapping[str, Any]:
    """Aggregates for a summary: counts by class, faults fired by type, events, times."""
    by_class: dict[str, int] = {}
    fired: dict[str, int] = {}
    events = 0
    virtual = 0.0
    runs = 0
    for r in results:
        runs += 1
        events += r.events
        virtual += r.virtual_time
        if r.failure_class:
            by_class[r.failure_class] = by_class.get(r.failure_class, 0) + 1
        for name, count in r.faults_fired:
            fired[name] = fired.get(name, 0) + count
    return {
        "seeds_run": runs,
        "failures": sum(by_class.values()),
        "failures_by_class": dict(sorted(by_class.items())),
        "faults_fired": dict(sorted(fired.items())),
        "events": events,
        "virtual_seconds": virtual,
    }
