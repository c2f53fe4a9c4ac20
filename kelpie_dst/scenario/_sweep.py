"""Sweeps: many seeds of scenarios or of a plain ``--entry`` program, on an executor.

The work is a list of :class:`SweepItem` (scenario, overrides, seed; or an entry and its run
options, seed) in a fixed order. An executor (``_executors.py``: this process, a pool of local
worker processes, a Dask cluster, each optionally restricted to a shard ``k/n``) runs them;
each seed's result depends only on the item, so every executor gives the results of
``jobs=1`` (only wall times differ). ``fail_fast`` and ``time_budget`` stop submitting work.

Before a failure is reported, the seed runs again in a fresh process (``_sweep_worker.py``): a
failure whose trace differs there depended on state that earlier seeds left in the worker
process, and is reported as such (exit 4) instead of with a replay line that would not
reproduce it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._entry import replay_command
from .._errors import UsageError
from .._result import RunResult
from ..threads._watchdog import DEFAULT_WATCHDOG
from ._runtime import ScenarioRun, describe_faults
from ._token import ReplayToken

if TYPE_CHECKING:
    from ._executors import Executor

__all__ = [
    "CarriedOver",
    "EntryOptions",
    "SeedResult",
    "SweepItem",
    "SweepOutcome",
    "drive",
    "parse_shard",
    "plan",
    "run_items",
    "totals",
]


@attrs.frozen
class EntryOptions:
    """How a plain ``--entry`` program runs (the options of ``kelpie-dst run --entry``)."""

    guards: str = "redirect"
    strategy: str = "random"
    faults: tuple[str, ...] = ()
    swarm: bool = False
    max_time: float | None = None
    watchdog: float = DEFAULT_WATCHDOG

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`kelpie_dst.run`."""
        return {
            "guards": self.guards,
            "strategy": self.strategy,
            "faults": list(self.faults),
            "swarm": self.swarm,
            "max_time": self.max_time,
            "watchdog": self.watchdog,
        }


@attrs.frozen
class SweepItem:
    """One seed to run: of scenario ``ref`` with ``overrides``, or, when ``entry`` is set, of
    the program ``ref`` (``module:function``) with those run options."""

    index: int
    ref: str
    overrides: tuple[str, ...]
    seed: int
    entry: EntryOptions | None = None


@attrs.frozen
class CarriedOver:
    """A failure that a fresh process did not reproduce: what the fresh run gave, the seeds
    this worker process ran before, and the module-level state that differs."""

    fresh_hash: str
    fresh_exit_code: int
    earlier: tuple[str, ...]  # "scenario seed=N", oldest first (the last 20)
    earlier_count: int
    state: tuple[str, ...]  # "module.name: list of 3 here, list of 1 in a fresh process"


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
    entry: EntryOptions | None = None
    carried_over: CarriedOver | None = None

    @classmethod
    def from_entry(
        cls, item: SweepItem, result: RunResult, faults: str, hashseed: str | None
    ) -> SeedResult:
        failure = result.failure
        return cls(
            scenario=item.ref,
            ref=item.ref,
            overrides=(),
            seed=item.seed,
            exit_code=result.exit_code,
            failure_class=failure.kind.name.lower() if failure else None,
            message=failure.message if failure else "",
            details=failure.details if failure else "",
            trace_hash=result.trace_hash,
            virtual_time=result.virtual_time,
            events=result.events,
            faults=faults,
            faults_fired=tuple(sorted(result.faults_fired.items())),
            metrics=(),
            hashseed=hashseed,
            wall_seconds=result.wall_seconds,
            entry=item.entry,
        )

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
        """The scenario replay token (``None`` for an entry, or under a random hash seed)."""
        if self.hashseed is None or self.entry is not None:
            return None
        return ReplayToken(self.ref, self.seed, self.overrides, self.trace_hash, self.hashseed)

    def replay(self) -> str | None:
        """The command that replays this seed, or ``None`` when there is none that would."""
        if self.carried_over is not None or self.hashseed is None:
            return None
        if self.entry is not None:
            options = self.entry.as_kwargs()
            return replay_command(self.ref, self.seed, options, hashseed=self.hashseed)
        token = self.token()
        return f"kelpie-dst replay {token.encode()}" if token is not None else None

    def replay_line(self) -> str:
        if self.carried_over is not None:
            return (
                "replay: none: the failure depends on seeds run earlier in the same process "
                "(a fresh process gives another trace; see above)"
            )
        if self.hashseed is None:
            return "replay: unavailable: the seed ran under a random PYTHONHASHSEED"
        if self.entry is not None:
            return f"replay: {self.replay()}"
        token = self.token()
        assert token is not None
        return token.replay_line()

    def to_json(self) -> dict[str, Any]:
        carried = self.carried_over
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
            "entry": attrs.asdict(self.entry) if self.entry is not None else None,
            "carried_over": attrs.asdict(carried) if carried is not None else None,
            "replay": self.replay(),
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


def run_items(
    items: Sequence[SweepItem],
    *,
    jobs: int = 1,
    executor: Executor | None = None,
    fail_fast: bool = False,
    time_budget: float | None = None,
    recheck: bool = True,
    on_result: Callable[[SeedResult], None] | None = None,
) -> SweepOutcome:
    """Run ``items`` on ``executor`` (default: this process for ``jobs=1``, else a pool of
    ``jobs`` local workers), which this call starts and stops; results come back in item
    order whatever runs them. ``recheck``: re-run each failure in a fresh process before
    reporting it (see the module docstring)."""
    from ._executors import local_executor

    chosen = executor if executor is not None else local_executor(jobs)
    with chosen:
        return drive(
            chosen,
            chosen.select(items),
            fail_fast=fail_fast,
            time_budget=time_budget,
            recheck=recheck,
            on_result=on_result,
        )


def drive(
    executor: Executor,
    items: Sequence[SweepItem],
    *,
    fail_fast: bool = False,
    time_budget: float | None = None,
    recheck: bool = True,
    on_result: Callable[[SeedResult], None] | None = None,
) -> SweepOutcome:
    """Run ``items`` on an executor the caller has started (see :func:`run_items`)."""
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
        if item.index in done:  # a re-run after a lost worker already answered
            return
        done[item.index] = result
        if on_result is not None:
            on_result(result)

    executor.run(items, recheck, should_stop, record)
    ordered = tuple(done[i.index] for i in items if i.index in done)
    elapsed = time.monotonic() - start
    return SweepOutcome(len(items), ordered, elapsed, stopped[0] if stopped else None)


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
