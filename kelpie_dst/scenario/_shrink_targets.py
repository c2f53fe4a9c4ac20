"""What the shrinker shrinks: a scenario (``--set`` overrides) or a plain program (``--entry``
options), as a :class:`Plan` of seed-independent knobs, and the fault report of a run.

A plan holds the faults the seed really ran with (explicit and swarm-chosen, with their
windows and target nodes), the workload's sizes, the duration (a scenario's ``duration``, at
which its faults heal; a program's virtual time limit), and a scenario's nodes. A target turns
a plan into a run and into the text that reproduces it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from .._entry import format_duration, load_entry
from .._faults import Fault, FaultPlan
from .._result import RunResult
from .._run import run
from .._trace import read_trace
from ._loader import load_scenario
from ._model import Scenario
from ._runtime import ScenarioRun, run_scenario

__all__ = [
    "EntryRun",
    "EntryTarget",
    "FaultMoment",
    "Plan",
    "PlanFault",
    "ScenarioTarget",
    "Target",
    "faults_before",
]


@attrs.frozen
class PlanFault:
    type: str
    probability: float
    start: float = 0.0
    end: float = math.inf
    targets: tuple[str, ...] = ()


@attrs.frozen
class Plan:
    faults: tuple[PlanFault, ...]
    sizes: tuple[tuple[str, int], ...] = ()
    duration: float | None = None  # None: a program without a time limit
    nodes: tuple[str, ...] = ()


@attrs.frozen
class EntryRun:
    """One run of a plain program (the entry counterpart of :class:`ScenarioRun`)."""

    entry: str
    seed: int
    result: RunResult
    options: dict[str, Any] = attrs.field(eq=False, hash=False)


class Target(Protocol):
    windows: bool  # whether fault windows can be expressed (and so shrunk)
    deadline: bool  # the duration is a time limit (not when faults heal, before a grace)
    duration_name: str

    def first(self, seed: int) -> Any: ...

    def initial(self, first: Any) -> Plan: ...

    def fault_end(self, plan: Plan) -> float | None: ...

    def key(self, plan: Plan) -> tuple[str, ...]: ...

    def run(self, plan: Plan, seed: int, trace_file: str | None = None) -> Any: ...

    def size_floor(self, name: str) -> int: ...


def _fault(fault: Fault) -> PlanFault:
    return PlanFault(fault.type, fault.probability, fault.start, fault.end, fault.nodes)


class ScenarioTarget:
    """A scenario file plus ``--set`` overrides."""

    windows = True
    duration_name = "duration"

    def __init__(self, base: Scenario, overrides: Sequence[str]) -> None:
        self.base = base
        self.overrides = tuple(overrides)
        self.deadline = base.liveness is None

    def first(self, seed: int) -> ScenarioRun:
        return run_scenario(self.base, seed)

    def fault_end(self, plan: Plan) -> float | None:
        """When the plan's faults heal at the latest."""
        heal_at = self.base.heal_at
        if plan.duration is None:
            return heal_at
        return plan.duration if heal_at is None else min(plan.duration, heal_at)

    def initial(self, first: ScenarioRun) -> Plan:
        base = self.base
        faults = sorted(first.explicit_faults + first.swarm_faults, key=lambda f: f.type)
        return Plan(
            faults=tuple(_fault(f) for f in faults),
            sizes=tuple((name, int(base.workload.params[name])) for name in base.workload.sizes),
            duration=base.duration,
            nodes=base.topology.nodes,
        )

    def size_floor(self, name: str) -> int:
        return self.base.workload.sizes[name]

    def key(self, plan: Plan) -> tuple[str, ...]:
        """The overrides (after the base ones) that turn the base scenario into ``plan``."""
        base = self.base
        out = list(self.overrides)
        if base.swarm.enabled:
            out.append("swarm.enabled=false")
        if plan.nodes != base.topology.nodes:
            out.append(f"topology.nodes={json.dumps(list(plan.nodes))}")
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
            if entry is not None and fault.targets != entry.targets:
                out.append(f"faults.{fault.type}.targets={json.dumps(list(fault.targets))}")
        for name, value in plan.sizes:
            if base.workload.params[name] != value:
                out.append(f"workload.params.{name}={value}")
        if plan.duration is not None and plan.duration != base.duration:
            out.append(f"duration={format_duration(plan.duration)}")
            live = base.liveness
            if live is not None and live.heal_at is not None and live.heal_at > plan.duration:
                out.append(f"liveness.heal_at={format_duration(plan.duration)}")
        return tuple(out)

    def run(self, plan: Plan, seed: int, trace_file: str | None = None) -> ScenarioRun:
        scenario = load_scenario(self.base.ref, self.key(plan))
        return run_scenario(scenario, seed, trace_file=trace_file)


class EntryTarget:
    """A plain program (``module:function``) with ``kelpie-dst run`` options."""

    windows = False  # --fault TYPE=PROB has no window
    deadline = True  # --max-time
    duration_name = "max time"

    def __init__(self, entry: str, options: dict[str, Any]) -> None:
        self.entry = entry
        self.main = load_entry(entry)
        self.options = options

    def first(self, seed: int) -> EntryRun:
        """The run as ``kelpie-dst run`` makes it (swarm as given)."""
        options = self.options
        result = run(
            self.main,
            seed=seed,
            strategy=options["strategy"],
            guards=options["guards"],
            faults=[Fault.parse(f) for f in options["faults"]],
            swarm=bool(options["swarm"]),
            max_time=options["max_time"],
        )
        return EntryRun(self.entry, seed, result, options)

    def fault_end(self, plan: Plan) -> float | None:
        return plan.duration

    def initial(self, first: EntryRun) -> Plan:
        profile = FaultPlan(tuple(Fault.parse(f) for f in self.options["faults"]), False)
        explicit = profile.faults
        if self.options.get("swarm"):
            explicit = FaultPlan(explicit, True).resolve(first.seed)
        return Plan(faults=tuple(_fault(f) for f in explicit), duration=self.options["max_time"])

    def size_floor(self, name: str) -> int:
        raise KeyError(name)  # a plain program declares no sizes

    def plan_options(self, plan: Plan) -> dict[str, Any]:
        return {
            **self.options,
            "faults": [f"{f.type}={f.probability!r}" for f in plan.faults],
            "swarm": False,
            "max_time": plan.duration,
        }

    def key(self, plan: Plan) -> tuple[str, ...]:
        options = self.plan_options(plan)
        return (*options["faults"], f"max_time={options['max_time']!r}")

    def run(self, plan: Plan, seed: int, trace_file: str | None = None) -> EntryRun:
        options = self.plan_options(plan)
        faults = [Fault.parse(f) for f in options["faults"]]
        result = run(
            self.main,
            seed=seed,
            strategy=options["strategy"],
            guards=options["guards"],
            faults=faults,
            swarm=False,
            max_time=options["max_time"],
            trace_file=trace_file,
        )
        return EntryRun(self.entry, seed, result, options)


@attrs.frozen
class FaultMoment:
    """A fault that fired, from the trace."""

    time: float
    node: str
    fault: str
    fields: tuple[tuple[str, Any], ...]

    def describe(self, failed_at: float) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.fields)
        where = f"node {self.node}: " if self.node not in ("", "-") else ""
        before = failed_at - self.time
        text = f"t={self.time:.3f}s ({before:.3f}s before the failure) {where}{self.fault}"
        return f"{text} {extra}".rstrip()


def faults_before(target: Target, plan: Plan, seed: int, limit: int = 5) -> list[FaultMoment]:
    """The last ``limit`` faults that fired before the failure, from a traced re-run."""
    with tempfile.TemporaryDirectory(prefix="kelpie-shrink-") as tmp:
        path = os.path.join(tmp, "trace.bin")
        outcome = target.run(plan, seed, trace_file=path)
        failure = outcome.result.failure
        until = failure.virtual_time if failure is not None else math.inf
        moments: list[FaultMoment] = []
        for event in read_trace(Path(path)):
            if event.kind != "fault" or event.time > until:
                continue
            fields = dict(event.fields)
            name = str(fields.pop("fault", "?"))
            node = fields.pop("target", None) or event.node
            moments.append(FaultMoment(event.time, str(node), name, tuple(fields.items())))
    return moments[-limit:]
