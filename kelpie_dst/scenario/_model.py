"""The validated form of a scenario file: attrs frozen values (see docs/scenarios.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .._clock import DEFAULT_LIVELOCK_STEPS
from .._entry import format_duration
from .._faults import Fault, fault_types
from .._rng import RngStream
from .._storms import SwarmIntensity, storm_specs
from ..threads._watchdog import DEFAULT_WATCHDOG
from ._workload import WorkloadInfo

__all__ = [
    "FaultEntry",
    "Liveness",
    "LlmTopology",
    "McpServer",
    "Scenario",
    "SimOptions",
    "Swarm",
    "Topology",
    "WorkloadSpec",
]


@attrs.frozen
class FaultEntry:
    """One fault type switched on by the scenario: ``[faults.<domain>.<name>]``."""

    type: str
    probability: float
    start: float = 0.0
    end: float = math.inf
    targets: tuple[str, ...] = ()
    params: tuple[tuple[str, float], ...] = ()

    def to_fault(self) -> Fault:
        return Fault(self.type, self.probability, self.start, self.end, self.targets, self.params)


@attrs.frozen
class Swarm:
    """Swarm mode: the seed picks which fault types are on, and how likely each is."""

    enabled: bool = False
    include: tuple[str, ...] = ()  # fault types or domains; empty means every registered type
    exclude: tuple[str, ...] = ()
    p_enabled: float = 0.5
    ranges: tuple[tuple[str, float, float], ...] = ()
    intensity: bool = False  # per seed, each domain off, mild or in storms (kelpie_dst._storms)
    keep_on: tuple[str, ...] = ()  # domains intensity never switches off

    def selects(self, fault_type: str) -> bool:
        domain = fault_type.split(".", 1)[0]
        if fault_type in self.exclude or domain in self.exclude:
            return False
        return not self.include or fault_type in self.include or domain in self.include

    def profile(self, seed: int, explicit: frozenset[str] = frozenset()) -> tuple[Fault, ...]:
        """The faults this seed switches on. Each type draws from its own stream
        (``swarm/<type>``), so registering a new type does not change other types' draws."""
        if not self.enabled:
            return ()
        ranges = {name: (low, high) for name, low, high in self.ranges}
        chosen = []
        for name, spec in fault_types().items():
            if name in explicit or not self.selects(name):
                continue
            rng = RngStream(seed, f"swarm/{name}")
            on = rng.random() < self.p_enabled
            low, high = ranges.get(name, spec.swarm_range)
            probability = round(low + (high - low) * rng.random(), 6)
            if on and probability > 0:
                chosen.append(Fault(name, probability))
        return tuple(chosen)


@attrs.frozen
class Liveness:
    """Heal every fault at ``heal_at`` (default: the scenario's duration), then the workload
    must return within ``within``."""

    within: float
    heal_at: float | None = None


@attrs.frozen
class LlmTopology:
    mode: str = "none"  # none | scripted | adversarial | helpful
    transport: str = "direct"  # direct | anthropic_api
    policy: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False)


@attrs.frozen
class McpServer:
    name: str
    tools: tuple[str, ...] = ()


@attrs.frozen
class StorageTopology:
    """``[topology.storage]``: where :func:`~kelpie_dst.open_kv` stores."""

    backend: str = "sim"
    """``sim`` (SimKV, in memory) or ``sqlite`` (a real SqliteKV file per owning node,
    kelpie_dst/shims/_sqlite_disk.py)."""
    fsync: float = 0.0
    """sqlite: virtual seconds each SQLite transaction spends writing before it commits."""


@attrs.frozen
class Topology:
    """The simulated world a workload builds; workloads read what they use."""

    nodes: tuple[str, ...] = ()
    database: str = ""
    llm: LlmTopology = LlmTopology()
    sandbox: bool = False
    mcp: tuple[McpServer, ...] = ()
    storage: StorageTopology = StorageTopology()


@attrs.frozen
class SimOptions:
    strategy: str = "random"
    pct_depth: int = 3
    guards: str = "redirect"
    guard_allow: tuple[str, ...] = ()
    """Module prefixes exempt from ``strict``: their calls are served deterministically
    (``redirect``) instead of failing, e.g. a test driver's HTTP client library."""
    buggify: bool = True
    hazards: tuple[str, ...] = ()
    """Dormant BUGGIFY sites armed for every seed (``kelpie_dst._buggify.DORMANT_SITES``)."""
    watchdog: float = DEFAULT_WATCHDOG
    """Seconds of real time a call may block outside the simulation before the run fails."""
    preemption: bool = True
    """Seeded preemption points inside simulated threads."""
    livelock_steps: int = DEFAULT_LIVELOCK_STEPS
    """Task steps at one virtual instant before the run fails as a livelock (0: never)."""


@attrs.frozen
class WorkloadSpec:
    entry: str
    fn: Callable[..., Any] = attrs.field(eq=False, hash=False, repr=False)
    params: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    info: WorkloadInfo | None = attrs.field(default=None, eq=False, hash=False, repr=False)

    @property
    def sizes(self) -> Mapping[str, int]:
        return self.info.sizes if self.info is not None else {}


@attrs.frozen
class Scenario:
    """A loaded scenario: everything that, with a seed, determines a run."""

    name: str
    ref: str  # how it was named: a name from the search path, or a file path
    path: Path
    workload: WorkloadSpec
    description: str = ""
    seeds: int = 100
    duration: float = 60.0
    topology: Topology = Topology()
    simulation: SimOptions = SimOptions()
    faults: tuple[FaultEntry, ...] = ()
    swarm: Swarm = Swarm()
    invariants: tuple[tuple[str, Callable[..., Any]], ...] = attrs.field(
        default=(), eq=False, hash=False, repr=False
    )
    invariant_names: tuple[str, ...] = ()
    liveness: Liveness | None = None
    overrides: tuple[str, ...] = ()
    document: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False, repr=False)

    @property
    def heal_at(self) -> float | None:
        if self.liveness is None:
            return None
        return self.liveness.heal_at if self.liveness.heal_at is not None else self.duration

    @property
    def deadline(self) -> float:
        """The virtual time by which the workload must have returned."""
        if self.liveness is None:
            return self.duration
        heal_at = self.heal_at
        assert heal_at is not None
        return heal_at + self.liveness.within

    def intensity(self, seed: int) -> SwarmIntensity | None:
        """The seed's fault intensity profile (None unless swarm ``intensity`` is on)."""
        swarm = self.swarm
        if not (swarm.enabled and swarm.intensity):
            return None
        domains = tuple(d for d in storm_specs() if swarm.selects(f"{d}.*"))
        horizon = self.heal_at if self.heal_at is not None else self.duration
        return SwarmIntensity.draw(seed, domains, horizon, swarm.keep_on)

    def resolve_faults(self, seed: int) -> tuple[tuple[Fault, ...], tuple[Fault, ...]]:
        """The explicit faults and the swarm-chosen ones for ``seed`` (explicit types win).
        With swarm ``intensity``, a domain the seed switched off loses its faults (explicit
        ones too), and a stormy domain gains its storm windows (among the swarm's faults)."""
        explicit = tuple(e.to_fault() for e in self.faults if e.probability > 0)
        swarm = self.swarm.profile(seed, frozenset(f.type for f in explicit))
        intensity = self.intensity(seed)
        if intensity is not None:
            # A storm hits the nodes the scenario aims its own faults of that domain at.
            targets: dict[str, set[str]] = {}
            for f in explicit:
                if f.nodes:
                    targets.setdefault(f.type.split(".", 1)[0], set()).update(f.nodes)
            aimed = {d: tuple(sorted(nodes)) for d, nodes in targets.items()}
            explicit = tuple(f for f in explicit if intensity.keeps(f.type))
            swarm = tuple(f for f in swarm if intensity.keeps(f.type)) + intensity.faults(aimed)
        return explicit, swarm

    def faults_for(self, seed: int) -> tuple[Fault, ...]:
        explicit, swarm = self.resolve_faults(seed)
        return tuple(sorted(explicit + swarm, key=lambda f: (f.type, f.start)))

    def describe_plan(self) -> str:
        """One line: the workload, its parameters, the duration and the liveness phase."""
        params = " ".join(f"{k}={v}" for k, v in sorted(self.workload.params.items()))
        text = f"workload {self.workload.entry}" + (f" {params}" if params else "")
        text += f"; duration {format_duration(self.duration)}"
        if self.liveness is not None:
            heal_at = self.heal_at
            assert heal_at is not None
            text += (
                f"; liveness: heal at {format_duration(heal_at)}, "
                f"then finish within {format_duration(self.liveness.within)}"
            )
        return text
