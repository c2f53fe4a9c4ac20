"""Fault intensity, FoundationDB style: per seed, each fault domain is off, mild or in storms.

Uniformly mild faults never reach the rare paths: storage retries used up, a write delayed past
a lease expiry, a pause longer than a lease, a clock jump across a lease deadline. So with swarm
``intensity`` on, the seed draws a *mode* for every fault domain (each from its own stream,
``swarm-intensity/<domain>``, so adding a domain moves nobody else's draws):

* ``off``: no fault of that domain at all, not even the scenario's explicit ones (a quiet
  domain is a profile too: it lets the others' faults dominate);
* ``mild``: the scenario's faults and the swarm's picks, as without intensity;
* ``storm``: mild, plus one or two *storm windows*: short stretches of virtual time where the
  domain's :class:`StormSpec` switches on its harsh faults (storage failing half the time,
  partitions and pauses longer than a lease, clock jumps of many seconds, ...).

Each domain registers its storm next to its fault types (:func:`register_storm`), with the
rest of its fault domain module.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ._faults import Fault, fault_types, loaded_fault_types
from ._rng import RngStream

__all__ = [
    "MODES",
    "Storm",
    "StormSpec",
    "SwarmIntensity",
    "register_storm",
    "storm_specs",
]

MODES = ("off", "mild", "storm")
WEIGHTS = (0.2, 0.5, 0.3)


@attrs.frozen
class StormSpec:
    """The storm of one domain: its faults (type, probability, params) during a window whose
    length is drawn from ``length`` seconds."""

    domain: str
    description: str
    faults: tuple[tuple[str, float, tuple[tuple[str, float], ...]], ...]
    length: tuple[float, float] = (1.0, 4.0)


_STORMS: dict[str, StormSpec] = {}


def register_storm(spec: StormSpec) -> StormSpec:
    """Register the storm of ``spec.domain`` (idempotent for an identical spec)."""
    known = loaded_fault_types()  # a domain registers its faults before its storm
    for name, _, _ in spec.faults:
        if name not in known or not name.startswith(spec.domain + "."):
            raise ValueError(f"storm {spec.domain!r}: {name!r} is not a fault of the domain")
    existing = _STORMS.get(spec.domain)
    if existing is not None and existing != spec:
        raise ValueError(f"the storm of {spec.domain!r} is already registered differently")
    _STORMS[spec.domain] = spec
    return spec


def storm_specs() -> dict[str, StormSpec]:
    fault_types()  # the shims' domains register their storms when they load
    return dict(sorted(_STORMS.items()))


@attrs.frozen
class Storm:
    """One storm window of a domain."""

    domain: str
    start: float
    end: float

    def describe(self) -> str:
        return f"{self.start:.1f}s-{self.end:.1f}s"


@attrs.frozen
class SwarmIntensity:
    """The modes one seed drew, and the storms and faults they add."""

    modes: tuple[tuple[str, str], ...]
    storms: tuple[Storm, ...] = ()

    def mode(self, domain: str) -> str:
        return dict(self.modes).get(domain, "mild")

    def keeps(self, fault_type: str) -> bool:
        return self.mode(fault_type.split(".", 1)[0]) != "off"

    def faults(self, targets: Mapping[str, tuple[str, ...]] | None = None) -> tuple[Fault, ...]:
        """The storms' faults; ``targets[domain]`` aims a domain's storms at those nodes."""
        specs = storm_specs()
        out = []
        for storm in self.storms:
            nodes = (targets or {}).get(storm.domain, ())
            for name, probability, params in specs[storm.domain].faults:
                out.append(Fault(name, probability, storm.start, storm.end, nodes, params))
        return tuple(out)

    def describe(self) -> str:
        """``clock=off llm=storm[3.1s-6.0s] ...``"""
        parts = []
        for domain, mode in self.modes:
            windows = [s.describe() for s in self.storms if s.domain == domain]
            parts.append(f"{domain}={mode}" + (f"[{', '.join(windows)}]" if windows else ""))
        return " ".join(parts)

    @classmethod
    def draw(
        cls, seed: int, domains: tuple[str, ...], horizon: float, keep_on: tuple[str, ...] = ()
    ) -> SwarmIntensity:
        """Each domain's mode, and its storm windows inside ``[0, horizon)``; a domain in
        ``keep_on`` is never switched off (a scenario about that domain)."""
        modes, storms = [], []
        specs = storm_specs()
        for domain in sorted(domains):
            rng = RngStream(seed, f"swarm-intensity/{domain}")
            pick, mode = rng.random(), MODES[-1]
            for candidate, weight in zip(MODES, WEIGHTS, strict=True):
                if pick < weight:
                    mode = candidate
                    break
                pick -= weight
            spec = specs.get(domain)
            if (mode == "storm" and (spec is None or horizon <= 0)) or (
                mode == "off" and domain in keep_on
            ):
                mode = "mild"
            modes.append((domain, mode))
            if mode != "storm":
                continue
            assert spec is not None
            for _ in range(1 + (rng.random() < 0.4)):
                low, high = spec.length
                length = min(horizon, low + (high - low) * rng.random())
                start = (horizon - length) * rng.random()
                storms.append(Storm(domain, round(start, 3), round(start + length, 3)))
        return cls(tuple(modes), tuple(sorted(storms, key=lambda s: (s.start, s.domain))))
