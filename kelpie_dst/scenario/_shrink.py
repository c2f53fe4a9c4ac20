"""Shrinking a failing seed: delta-debug its faults, nodes, workload size and virtual duration.

The seed stays fixed; what shrinks is the configuration around it, and a candidate is kept when
the seed still fails *the same way* (the same failure class; a deadlock stays a deadlock). The
fault plan starts as the faults the seed really ran with (explicit and swarm-chosen, with swarm
then switched off), so every candidate is the original plus overrides, and the result replays.
Passes, in a loop until none makes progress or the run budget is spent:

1. drop faults (ddmin over the fault types);
2. remove nodes of the topology, one at a time (never the last one; a fault whose every
   target node is gone goes too, and the others lose the removed node from their targets);
3. lower workload sizes (the parameters the workload declares as ``sizes``);
4. shorten the duration: first cut it just after the moment of the failure (the run up to
   that moment is the same run, since faults heal there and nothing before it changes), then a
   quarter, a half, three quarters, nine tenths;
5. lower probabilities (towards zero, keeping the fault);
6. narrow each fault's window to the half that still fails.

A plain program (``--entry``) shrinks the same way over what its command line can say: its
``--fault`` list (swarm choices made explicit), their probabilities, and its ``--max-time``,
which is only ever cut just after the failure (a shorter limit would turn any run into a
liveness failure). The result names the last faults that fired before the failure, from a
traced run of the minimal configuration.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .._entry import format_duration
from .._errors import FailureKind, UsageError
from ._loader import load_scenario
from ._runtime import ScenarioRun
from ._shrink_targets import (
    EntryTarget,
    FaultMoment,
    Plan,
    ScenarioTarget,
    Target,
    faults_before,
)
from ._toml import dumps

__all__ = ["ShrinkResult", "shrink", "shrink_entry"]


@attrs.frozen
class ShrinkResult:
    original: Any  # ScenarioRun, or EntryRun for a plain program
    minimal: Any
    overrides: tuple[str, ...]  # scenarios: everything after the ref, base overrides first
    runs: int
    elapsed: float
    notes: tuple[str, ...]
    last_faults: tuple[FaultMoment, ...] = ()

    @property
    def kind(self) -> FailureKind:
        failure = self.minimal.result.failure
        assert failure is not None
        return failure.kind  # type: ignore[no-any-return]

    @property
    def failed_at(self) -> tuple[float, float]:
        """When the original and the minimal run failed (virtual seconds)."""
        return (
            self.original.result.failure.virtual_time,
            self.minimal.result.failure.virtual_time,
        )

    def toml(self) -> str:
        """The minimal reproduction as a standalone scenario file."""
        if not isinstance(self.minimal, ScenarioRun):
            raise UsageError("a plain program has no scenario file; use its run command")
        doc = copy.deepcopy(dict(self.minimal.scenario.document))
        original = self.original.scenario
        doc["name"] = f"{original.name}-seed{self.minimal.seed}-min"
        doc["description"] = (
            f"Minimal reproduction of {original.name} seed {self.minimal.seed} "
            f"({self.kind.label}), found by kelpie-dst shrink."
        )
        faults = doc.get("faults", {})
        for domain in list(faults):
            for name in list(faults[domain]):
                entry = faults[domain][name]
                p = entry.get("probability") if isinstance(entry, dict) else entry
                if p == 0:
                    del faults[domain][name]
            if not faults[domain]:
                del faults[domain]
        ordered: dict[str, Any] = {k: doc[k] for k in ("name", "description") if k in doc}
        ordered.update({k: v for k, v in doc.items() if k not in ordered})
        return dumps(ordered)


def shrink(
    ref: str,
    seed: int,
    overrides: Sequence[str] = (),
    *,
    max_runs: int = 300,
    time_budget: float | None = None,
    on_step: Callable[[str], None] | None = None,
    report_faults: bool = True,
) -> ShrinkResult:
    """Minimise the configuration under which ``seed`` of scenario ``ref`` fails the same way."""
    started = time.monotonic()
    target = ScenarioTarget(load_scenario(ref, overrides), overrides)
    first = target.first(seed)
    if first.result.failure is None:
        raise UsageError(f"seed {seed} of {ref} does not fail, so there is nothing to shrink")
    return _shrink(target, first, seed, max_runs, time_budget, on_step, report_faults, started)


def shrink_entry(
    entry: str,
    seed: int,
    options: dict[str, Any],
    *,
    max_runs: int = 300,
    time_budget: float | None = None,
    on_step: Callable[[str], None] | None = None,
    report_faults: bool = True,
) -> ShrinkResult:
    """Minimise the ``kelpie-dst run --entry`` options under which ``seed`` fails the same way
    (``options`` as the CLI builds them: guards, strategy, faults, swarm, max_time)."""
    started = time.monotonic()
    target = EntryTarget(entry, options)
    first = target.first(seed)
    if first.result.failure is None:
        raise UsageError(f"seed {seed} of {entry} does not fail, so there is nothing to shrink")
    return _shrink(target, first, seed, max_runs, time_budget, on_step, report_faults, started)


def _shrink(
    target: Target,
    first: Any,
    seed: int,
    max_runs: int,
    time_budget: float | None,
    on_step: Callable[[str], None] | None,
    report_faults: bool,
    started: float,
) -> ShrinkResult:
    shrinker = _Shrinker(target, seed, first, max_runs, time_budget, started)
    shrinker.log = on_step or (lambda _: None)
    plan = shrinker.loop(target.initial(first))
    moments: list[FaultMoment] = []
    if report_faults:
        moments = faults_before(target, plan, seed)
    return ShrinkResult(
        first,
        shrinker.best_run,
        target.key(plan),
        shrinker.runs,
        time.monotonic() - started,
        tuple(shrinker.notes),
        tuple(moments),
    )


def _signature(outcome: Any) -> tuple[FailureKind, bool] | None:
    """How a run failed, as far as shrinking must keep it: the class, and for a liveness
    failure whether it was a deadlock (not the time limit)."""
    failure = outcome.result.failure
    if failure is None:
        return None
    return failure.kind, failure.message.startswith("deadlock")


class _Shrinker:
    def __init__(
        self,
        target: Target,
        seed: int,
        first: Any,
        max_runs: int,
        time_budget: float | None,
        started: float,
    ) -> None:
        self.target = target
        self.seed = seed
        self.signature = _signature(first)
        self.max_runs = max_runs
        self.time_budget = time_budget
        self.started = started
        self.runs = 1
        self.cache: dict[tuple[str, ...], bool] = {}
        self.best_run: Any = first
        self.notes: list[str] = []
        self.log: Callable[[str], None] = lambda _: None

    def exhausted(self) -> bool:
        if self.runs >= self.max_runs:
            return True
        return self.time_budget is not None and time.monotonic() - self.started > self.time_budget

    def fails(self, plan: Plan) -> bool:
        key = self.target.key(plan)
        if key in self.cache:
            return self.cache[key]
        if self.exhausted():
            return False
        self.runs += 1
        try:
            outcome = self.target.run(plan, self.seed)
        except UsageError:  # a candidate the scenario refuses (say, too few nodes)
            self.cache[key] = False
            return False
        ok = _signature(outcome) == self.signature
        self.cache[key] = ok
        if ok:
            self.best_run = outcome
        return ok

    @property
    def failed_at(self) -> float:
        return float(self.best_run.result.failure.virtual_time)

    def loop(self, plan: Plan) -> Plan:
        while not self.exhausted():
            before = plan
            steps = (
                self.drop_faults,
                self.nodes,
                self.sizes,
                self.duration,
                self.probabilities,
                self.windows,
            )
            for step in steps:
                plan = step(plan)
            if plan == before:
                break
        return plan

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.log(text)

    def drop_faults(self, plan: Plan) -> Plan:
        faults = list(plan.faults)
        chunks = 2
        while faults and not self.exhausted():
            size = math.ceil(len(faults) / chunks)
            for i in range(0, len(faults), size):
                candidate = faults[:i] + faults[i + size :]
                if self.fails(attrs.evolve(plan, faults=tuple(candidate))):
                    dropped = ", ".join(f.type for f in faults[i : i + size])
                    self.note(f"dropped {dropped}")
                    faults = candidate
                    chunks = max(chunks - 1, 2)
                    break
            else:
                if chunks >= len(faults):
                    break
                chunks = min(len(faults), chunks * 2)
        return attrs.evolve(plan, faults=tuple(faults))

    def nodes(self, plan: Plan) -> Plan:
        index = len(plan.nodes) - 1
        while index >= 0 and len(plan.nodes) > 1 and not self.exhausted():
            removed = plan.nodes[index]
            faults = []
            for fault in plan.faults:
                if removed in fault.targets:
                    left = tuple(t for t in fault.targets if t != removed)
                    if not left:
                        continue  # it targeted only removed nodes
                    fault = attrs.evolve(fault, targets=left)
                faults.append(fault)
            nodes = plan.nodes[:index] + plan.nodes[index + 1 :]
            candidate = attrs.evolve(plan, nodes=nodes, faults=tuple(faults))
            if self.fails(candidate):
                self.note(f"nodes: {len(plan.nodes)} -> {len(nodes)} (without {removed})")
                plan = candidate
            index -= 1
        return plan

    def sizes(self, plan: Plan) -> Plan:
        for index, (name, value) in enumerate(plan.sizes):
            floor = self.target.size_floor(name)
            while True:
                candidates = sorted(
                    {c for c in (floor, value // 4, value // 2, value - 1) if floor <= c < value}
                )
                for c in candidates:
                    sizes = list(plan.sizes)
                    sizes[index] = (name, c)
                    if self.fails(attrs.evolve(plan, sizes=tuple(sizes))):
                        self.note(f"{name}: {value} -> {c}")
                        plan, value = attrs.evolve(plan, sizes=tuple(sizes)), c
                        break
                else:
                    break
        return plan

    def duration(self, plan: Plan) -> Plan:
        """Cut the duration just after the failure, then (when it is when faults heal, not a
        time limit) try shorter ones. A time limit is never cut below the failure: a run
        that fails by reaching its time limit would still do so with any shorter one."""
        assert self.signature is not None
        timed_out = self.signature == (FailureKind.LIVENESS, False)
        if self.target.deadline and timed_out:
            return plan
        while True:
            d = plan.duration
            cut = math.floor(self.failed_at * 1000 + 1) / 1000  # just after the failure
            candidates = [cut] if d is None or cut < d else []
            if not self.target.deadline and d is not None:
                candidates += [round(d * f, 3) for f in (0.25, 0.5, 0.75, 0.9)]
            for c in candidates:
                shorter = d is None or 0 < c < d
                if shorter and self.fails(attrs.evolve(plan, duration=c)):
                    was = format_duration(d) if d is not None else "no limit"
                    self.note(f"{self.target.duration_name}: {was} -> {format_duration(c)}")
                    plan = attrs.evolve(plan, duration=c)
                    break
            else:
                return plan

    def _replace(self, plan: Plan, index: int, fault: Any) -> Plan:
        faults = list(plan.faults)
        faults[index] = fault
        return attrs.evolve(plan, faults=tuple(faults))

    def probabilities(self, plan: Plan) -> Plan:
        for index in range(len(plan.faults)):
            while (p := plan.faults[index].probability) > 1e-4:
                for factor in (1 / 16, 1 / 4, 1 / 2):
                    c = float(f"{p * factor:.6g}")
                    fault = attrs.evolve(plan.faults[index], probability=c)
                    if self.fails(self._replace(plan, index, fault)):
                        self.note(f"{fault.type}: probability {p:g} -> {c:g}")
                        plan = self._replace(plan, index, fault)
                        break
                else:
                    break
        return plan

    def windows(self, plan: Plan) -> Plan:
        end_of_faults = self.target.fault_end(plan)
        if not self.target.windows or end_of_faults is None:
            return plan
        limit = max(end_of_faults / 64, 0.01)
        for index in range(len(plan.faults)):
            while True:
                fault = plan.faults[index]
                start, end = fault.start, min(fault.end, end_of_faults)
                if end - start < 2 * limit:
                    break
                mid = round((start + end) / 2, 3)
                for window in ((start, mid), (mid, end)):
                    candidate = attrs.evolve(fault, start=window[0], end=window[1])
                    if self.fails(self._replace(plan, index, candidate)):
                        low = format_duration(window[0]) if window[0] else "0s"
                        self.note(f"{fault.type}: window [{low}, {format_duration(window[1])})")
                        plan = self._replace(plan, index, candidate)
                        break
                else:
                    break
        return plan
