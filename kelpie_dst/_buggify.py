"""``buggify``: FoundationDB-style fault sites inside production code.

Outside a simulation ``buggify`` returns ``False`` at the cost of one global read. Inside one,
each site is enabled for the whole run with probability 0.25 (decided from the seed and the
site's name, so adding a site does not move the others), and an enabled site then fires with the
given probability on each call. Every firing is traced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._rng import derive_seed

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["SITE_ENABLE_PROBABILITY", "Buggify", "buggify"]

SITE_ENABLE_PROBABILITY = 0.25

# The running simulation, if any (one per thread at a time; trio allows no more).
_CURRENT: list[Simulation | None] = [None]


def buggify(site: str, probability: float = 0.25) -> bool:
    """True when the simulation decides this site misbehaves now; always False in production."""
    sim = _CURRENT[0]
    if sim is None:
        return False
    return sim.buggify.fires(site, probability)


class Buggify:
    """Per-run buggify state: which sites are enabled, and the firing stream."""

    def __init__(self, sim: Simulation, enabled: bool = True) -> None:
        self.sim = sim
        self.on = enabled
        self._sites: dict[str, bool] = {}
        self._stream = sim.rng("buggify")
        self.fired: dict[str, int] = {}

    def site_enabled(self, site: str) -> bool:
        enabled = self._sites.get(site)
        if enabled is None:
            draw = derive_seed(self.sim.seed, f"buggify-site/{site}") / 2**64
            enabled = self._sites[site] = draw < SITE_ENABLE_PROBABILITY
            self.sim.trace_event("buggify.site", site=site, enabled=enabled)
        return enabled

    def fires(self, site: str, probability: float) -> bool:
        if not self.on or self.sim.faults.healed or not self.site_enabled(site):
            return False
        if self._stream.random() >= probability:
            return False
        self.fired[site] = self.fired.get(site, 0) + 1
        self.sim.trace_event("buggify", site=site)
        return True
