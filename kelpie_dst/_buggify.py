"""``buggify``: FoundationDB-style fault sites inside production code.

Outside a simulation ``buggify`` returns ``False`` at the cost of one global read. Inside one,
each site is enabled for the whole run with probability 0.25 (decided from the seed and the
site's name, so adding a site does not move the others), and an enabled site then fires with the
given probability on each call. Every firing is traced.

**Dormant sites** (:data:`DORMANT_SITES`) are sites added after the scenarios' traces were
recorded: reaching one would trace its enable decision and move every run that reaches it,
invalidating the seed sweeps and mutant catches recorded on those traces (docs/decisions.md,
Dlead18-1). Such a site never fires and leaves no trace unless the run arms it (``hazards=``,
a scenario's ``[simulation] hazards``); an armed site is enabled for the whole run. The next
change that moves every trace anyway should make them ordinary sites.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._errors import UsageError
from ._rng import derive_seed

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["DORMANT_SITES", "SITE_ENABLE_PROBABILITY", "Buggify", "buggify", "check_hazards"]

SITE_ENABLE_PROBABILITY = 0.25

# site name (as a scenario arms it) -> what firing means
DORMANT_SITES: dict[str, str] = {
    "agent:service.answer_lost": (
        "an agent request the service may safely repeat was applied, but its answer is lost on "
        "the way back (a lease lapsing or a connection dropping after the commit): the service "
        "retries it as an unknown outcome"
    ),
}


def check_hazards(sites: Iterable[str]) -> tuple[str, ...]:
    """``sites`` as a tuple, each a dormant site (a clear error otherwise)."""
    out = tuple(sites)
    for site in out:
        if site not in DORMANT_SITES:
            known = ", ".join(sorted(DORMANT_SITES))
            raise UsageError(f"unknown dormant hazard site {site!r} (known: {known})")
    return out


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

    def __init__(self, sim: Simulation, enabled: bool = True, armed: Iterable[str] = ()) -> None:
        self.sim = sim
        self.on = enabled
        self.armed = frozenset(armed)
        self._sites: dict[str, bool] = {}
        self._stream = sim.rng("buggify")
        self.fired: dict[str, int] = {}

    def site_enabled(self, site: str) -> bool:
        enabled = self._sites.get(site)
        if enabled is None and site in DORMANT_SITES:  # no draw, no event unless armed
            enabled = self._sites[site] = site in self.armed
            if enabled:
                self.sim.trace_event("buggify.site", site=site, enabled=True)
        elif enabled is None:
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
