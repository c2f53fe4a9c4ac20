"""Shrinking a failing seed: delta-debug its fault plan, workload size and virtual duration.

The seed stays fixed; what shrinks is the configuration around it, and a candidate is kept when
the seed still fails *with the same failure class*. The fault plan starts as the faults the seed
really ran with (explicit and swarm-chosen, with swarm then switched off), so every candidate is
an ordinary scenario plus ``--set`` overrides, and the result replays with a token. Passes, in
a loop until none makes progress or the run budget is spent:

1. drop faults (ddmin over the fault types);
2. lower workload sizes (the parameters the workload declares as ``sizes``);
3. shorten the duration (and an explicit ``liveness.heal_at`` with it);
4. lower probabilities (towards zero, keeping the fault);
5. narrow each fault's window to the half that still fails.
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
from ._model import Scenario
from ._runtime import ScenarioRun, run_scenario
from ._toml import dumps

__all__ = ["ShrinkResult", "shrink"]


@attrs.frozen
class _Fault:
    type: str
    probability: float
    start: float
    end: float


@attrs.frozen
class _Plan:
    faults: tuple[_Fault, ...]
    sizes: tuple[tuple[str, int], ...]
    duration: float


@attrs.frozen
class ShrinkResult:
    original: ScenarioRun
    minimal: ScenarioRun
    overrides: tuple[str, ...]  # everything after the scenario ref, base overrides first
    runs: int
    elapsed: float
    notes: tuple[str, ...]

    @property
    def kind(self) -> FailureKind:
        assert self.minimal.result.failure is not None
        return self.minimal.result.failure.kind

    def toml(self) -> str:
        """The minimal reproduction as a standalone scenario file."""
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
) -> ShrinkResult:
    """Minimise the configuration under which ``seed`` of ``ref`` fails the same way."""
    started = time.monotonic()
    base = load_scenario(ref, overrides)
    first = run_scenario(base, seed)
    if first.result.failure is None:
        raise UsageError(f"seed {seed} of {ref} does not fail, so there is nothing to shrink")
    target = first.result.failure.kind
    explicit, swarm = first.explicit_faults, first.swarm_faults
    initial = _Plan(
        faults=tuple(
            _Fault(f.type, f.probability, f.start, f.end)
            for f in sorted(explicit + swarm, key=lambda f: f.type)
        ),
        sizes=tuple((name, int(base.workload.params[name])) for name in base.workload.sizes),
        duration=base.duration,
    )
    shrinker = _Shrinker(base, seed, tuple(overrides), target, max_runs, time_budget, started)
    shrinker.best = initial
    shrinker.best_run = first
    shrinker.log = on_step or (lambda _: None)
    plan = shrinker.loop(initial)
    final = shrinker.overrides_for(plan)
    minimal = shrinker.best_run
    assert minimal is not None
    return ShrinkResult(
        first, minimal, final, shrinker.runs, time.monotonic() - started, tuple(shrinker.notes)
    )


class _Shrinker:
    def __init__(
        self,
        base: Scenario,
        seed: int,
        overrides: tuple[str, ...],
        target: FailureKind,
        max_runs: int,
        time_budget: float | None,
        started: float,
    ) -> None:
        self.base = base
        self.seed = seed
        self.overrides = overrides
        self.target = target
        self.max_runs = max_runs
        self.time_budget = time_budget
        self.started = started
        self.runs = 1
        self.cache: dict[tuple[str, ...], bool] = {}
        self.best: _Plan | None = None
        self.best_run: ScenarioRun | None = None
        self.notes: list[str] = []
        self.log: Callable[[str], None] = lambda _: None
        self.phase_end = base.heal_at if base.heal_at is not None else base.duration

    def exhausted(self) -> bool:
        if self.runs >= self.max_runs:
            return True
        return self.time_budget is not None and time.monotonic() - self.started > self.time_budget

    def overrides_for(self, plan: _Plan) -> tuple[str, ...]:
        base = self.base
        out = list(self.overrides)
        if base.swarm.enabled:
            out.append("swarm.enabled=false")
        kept = {f.type: f for f in plan.faults}
        original = {e.type: e for e in base.faults}
        for dropped in base.faults:
            if dropped.type not in kept and dropped.probability > 0:
                out.append(f"faults.{dropped.type}=0")
        for fault in plan.faults:
            entry = original.get(fault.type)
            if entry is None or entry.probability != fault.probability:
                out.append(f"faults.{fault.type}.probability={fault.probability!r}")
            old = (entry.start, entry.end) if entry is not None else (0.0, math.inf)
            if (fault.start, fault.end) != old:
                start = "0s" if fault.start == 0 else format_duration(fault.start)
                end = "inf" if fault.end == math.inf else format_duration(fault.end)
                out.append(f'faults.{fault.type}.window=["{start}", "{end}"]')
        for name, value in plan.sizes:
            if base.workload.params[name] != value:
                out.append(f"workload.params.{name}={value}")
        if plan.duration != base.duration:
            out.append(f"duration={format_duration(plan.duration)}")
            live = base.liveness
            if live is not None and live.heal_at is not None and live.heal_at > plan.duration:
                out.append(f"liveness.heal_at={format_duration(plan.duration)}")
        return tuple(out)

    def fails(self, plan: _Plan) -> bool:
        key = self.overrides_for(plan)
        if key in self.cache:
            return self.cache[key]
        if self.exhausted():
            return False
        self.runs += 1
        run = run_scenario(load_scenario(self.base.ref, key), self.seed)
        failure = run.result.failure
        ok = failure is not None and failure.kind is self.target
        self.cache[key] = ok
        if ok:
            self.best, self.best_run = plan, run
        return ok

    def loop(self, plan: _Plan) -> _Plan:
        while not self.exhausted():
            before = plan
            steps = (self.drop_faults, self.sizes, self.duration, self.probabilities, self.windows)
            for step in steps:
                plan = step(plan)
            if plan == before:
                break
        return plan

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.log(text)

    def drop_faults(self, plan: _Plan) -> _Plan:
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

    def sizes(self, plan: _Plan) -> _Plan:
        minimums = self.base.workload.sizes
        for index, (name, value) in enumerate(plan.sizes):
            while True:
                candidates = sorted(
                    {
                        c
                        for c in (minimums[name], value // 4, value // 2, value - 1)
                        if minimums[name] <= c < value
                    }
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

    def duration(self, plan: _Plan) -> _Plan:
        while True:
            d = plan.duration
            for factor in (0.25, 0.5, 0.75):
                c = round(d * factor, 3)
                if c > 0 and c < d and self.fails(attrs.evolve(plan, duration=c)):
                    self.note(f"duration: {format_duration(d)} -> {format_duration(c)}")
                    plan = attrs.evolve(plan, duration=c)
                    break
            else:
                return plan

    def _replace(self, plan: _Plan, index: int, fault: _Fault) -> _Plan:
        faults = list(plan.faults)
        faults[index] = fault
        return attrs.evolve(plan, faults=tuple(faults))

    def probabilities(self, plan: _Plan) -> _Plan:
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

    def windows(self, plan: _Plan) -> _Plan:
        limit = max(self.phase_end / 64, 0.01)
        for index in range(len(plan.faults)):
            while True:
                fault = plan.faults[index]
                start, end = fault.start, min(fault.end, self.phase_end)
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
