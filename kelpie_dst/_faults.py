"""The fault core: a registry of fault types, fault plans, swarm profiles, and the injector.

Each fault domain (process, network, storage, clock, llm, sandbox, mcp) registers its fault types
here with :func:`register_fault`. A :class:`FaultPlan` lists the faults switched on for a run:
each with a probability, an optional virtual-time window ``[start, end)`` and an optional node
filter. At run time, shims ask :meth:`FaultInjector.fires`; decisions are drawn from one stream
per domain, and each fault that fires is traced (design.md §1.3).

In swarm mode the seed itself picks which fault types are on and how likely each is, within the
ranges their specs declare (TigerBeetle's ``options_swarm``), each type from its own stream
``swarm/<type>``; the chosen profile is printed.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._errors import UsageError
from ._rng import RngStream

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = [
    "Fault",
    "FaultInjector",
    "FaultPlan",
    "FaultSpec",
    "fault_types",
    "register_fault",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


@attrs.frozen
class FaultSpec:
    """A fault type: ``domain.name``, what it does, its parameters and their defaults."""

    name: str
    description: str
    params: Mapping[str, float] = attrs.field(factory=dict, hash=False)
    swarm_range: tuple[float, float] = (0.0, 0.1)
    observed: str = ""

    @property
    def domain(self) -> str:
        return self.name.split(".", 1)[0]


_REGISTRY: dict[str, FaultSpec] = {}


def register_fault(spec: FaultSpec) -> FaultSpec:
    """Register a fault type (idempotent for an identical spec)."""
    if not _NAME.match(spec.name):
        raise ValueError(f"fault type names look like 'domain.name', not {spec.name!r}")
    existing = _REGISTRY.get(spec.name)
    if existing is not None and existing != spec:
        raise ValueError(f"fault type {spec.name!r} is already registered differently")
    _REGISTRY[spec.name] = spec
    return spec


_BUILTIN_LOADED = [False]


def _load_builtin() -> None:
    """Register the shims' fault domains (storage, llm, sandbox, mcp): importing
    ``kelpie_dst.shims`` imports ``kelpie_agent``, so it waits until a fault type is needed."""
    if not _BUILTIN_LOADED[0]:
        _BUILTIN_LOADED[0] = True
        from . import shims  # noqa: F401  (registers on import)


def fault_types() -> dict[str, FaultSpec]:
    """Every fault type, built-in or registered, by name, in sorted order."""
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def loaded_fault_types() -> frozenset[str]:
    """The fault types registered so far, without loading the built-in shims (for modules
    that register their own types while the package is still importing)."""
    return frozenset(_REGISTRY)


def _spec(name: str) -> FaultSpec | None:
    spec = _REGISTRY.get(name)
    if spec is None and not _BUILTIN_LOADED[0]:
        _load_builtin()
        spec = _REGISTRY.get(name)
    return spec


def _check_probability(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise UsageError(f"fault probability must be within [0, 1], got {value!r}")


@attrs.frozen
class Fault:
    """One fault switched on for a run."""

    type: str
    probability: float = attrs.field(validator=_check_probability)
    start: float = 0.0
    end: float = math.inf
    nodes: tuple[str, ...] = ()
    params: tuple[tuple[str, float], ...] = ()

    def __attrs_post_init__(self) -> None:
        spec = _spec(self.type)
        if spec is None:
            known = ", ".join(fault_types()) or "none registered"
            raise UsageError(f"unknown fault type {self.type!r} (known: {known})")
        for key, _ in self.params:
            if key not in spec.params:
                allowed = ", ".join(spec.params) or "none"
                raise UsageError(
                    f"fault {self.type!r} has no parameter {key!r} (allowed: {allowed})"
                )
        if self.start >= self.end:
            raise UsageError(f"fault {self.type!r} window [{self.start}, {self.end}) is empty")

    @property
    def spec(self) -> FaultSpec:
        return _REGISTRY[self.type]

    def param(self, name: str) -> float:
        for key, value in self.params:
            if key == name:
                return value
        return self.spec.params[name]

    def applies(self, now: float, node: str | None) -> bool:
        if not (self.start <= now < self.end):
            return False
        return not self.nodes or node is None or node in self.nodes

    def describe(self) -> str:
        text = f"{self.type}={self.probability:g}"
        if self.start or self.end != math.inf:
            text += f" window=[{self.start:g}s, {self.end:g}s)"
        if self.nodes:
            text += f" nodes={','.join(self.nodes)}"
        for key, value in self.params:
            text += f" {key}={value:g}"
        return text

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Parse the CLI form ``TYPE=PROBABILITY``."""
        name, sep, prob = text.partition("=")
        if not sep:
            raise UsageError(f"--fault takes TYPE=PROBABILITY, got {text!r}")
        try:
            probability = float(prob)
        except ValueError:
            raise UsageError(f"--fault {name}: probability {prob!r} is not a number") from None
        return cls(name.strip(), probability)


@attrs.frozen
class FaultPlan:
    """The faults of one run, and whether swarm mode may add more."""

    faults: tuple[Fault, ...] = ()
    swarm: bool = False

    def resolve(self, seed: int) -> tuple[Fault, ...]:
        """The effective faults: in swarm mode, the seed's profile; explicit faults win."""
        explicit = {f.type for f in self.faults}
        chosen = list(self.faults)
        if self.swarm:
            for name, spec in fault_types().items():
                # One stream per type: registering a new type never moves the others' draws.
                rng = RngStream(seed, f"swarm/{name}")
                on = rng.random() < 0.5
                low, high = spec.swarm_range
                probability = low + (high - low) * rng.random()
                if on and name not in explicit and probability > 0:
                    chosen.append(Fault(name, round(probability, 6)))
        return tuple(sorted(chosen, key=lambda f: (f.type, f.start)))


class FaultInjector:
    """Answers "does this fault fire now?" for shims, from per-domain streams."""

    def __init__(self, sim: Simulation, faults: Iterable[Fault]) -> None:
        self.sim = sim
        self.active: dict[str, list[Fault]] = {}
        for fault in faults:
            self.active.setdefault(fault.type, []).append(fault)
        self._streams: dict[str, RngStream] = {}
        self._last_draw: dict[tuple[int, str | None], float] = {}
        self.fired: Counter[str] = Counter()
        self.healed = False

    def enabled(self, fault_type: str) -> bool:
        return not self.healed and fault_type in self.active

    def fires(
        self, fault_type: str, node: str | None = None, *, periodic: bool = False, **fields: Any
    ) -> Fault | None:
        """Draw once for ``fault_type``; return the fault that fired, or ``None``.

        ``periodic``: the caller is a nemesis ticking at the smallest ``interval`` of the type's
        faults; each fault (and node) then draws only once its own ``interval`` has passed
        since its last draw, so a storm's short interval does not make the scenario's mild
        fault of the same type fire more often."""
        if self.healed:
            return None
        candidates = self.active.get(fault_type)
        if not candidates:
            return None
        now = self.sim.now()
        for fault in candidates:
            if not fault.applies(now, node):
                continue
            if periodic:
                key = (id(fault), node)
                last = self._last_draw.get(key, fault.start if fault.start > 0 else 0.0)
                if now + 1e-9 < last + fault.param("interval") and key in self._last_draw:
                    continue
                self._last_draw[key] = now
            domain = fault_type.split(".", 1)[0]
            stream = self._streams.get(domain)
            if stream is None:
                stream = self._streams[domain] = self.sim.rng(f"fault/{domain}")
            if stream.random() < fault.probability:
                self.fired[fault_type] += 1
                self.sim.trace_event("fault", fault=fault_type, target=node, **fields)
                return fault
        return None

    def enable(self, fault: Fault) -> None:
        """Add ``fault`` to a running simulation (it applies within its own window).

        Only fault types decided where the I/O happens react to this; types whose nemesis is
        set up when the run starts (process, partitions, clogs, clocks) do not start one here.
        Ignored after :meth:`heal`, like every other fault.
        """
        self.active.setdefault(fault.type, []).append(fault)
        self.sim.trace_event("fault.enable", fault=fault.describe())

    def heal(self) -> None:
        """Switch every fault off for the rest of the run (the liveness phase)."""
        self.healed = True
        self.sim.trace_event("fault.heal_all")
