"""The Hazards port: FoundationDB's BUGGIFY for kelpie_agent, and named risky points.

Production code marks the places where a rare event would hurt most: between a durable commit
and its acknowledgement, between a tool's side effect and the commit of its result, around
lease renewal and handoff, inside retry loops. In production these calls cost one method call
and do nothing (:class:`NoHazards`). In a simulation (``kelpie_dst.shims.sim_ports``) they are
how the simulator makes rare paths common:

* :meth:`Hazards.buggify` answers True now and then, for sites the seed switched on, so the
  caller takes its rare branch (a late renewal, a forced retry);
* :meth:`Hazards.point` may delay the caller (sometimes longer than a lease) or crash the
  calling node right there (the ``process.crash_at`` fault), so a crash lands exactly between a
  commit and its acknowledgement rather than at a random moment.

Site names are dotted, ``<layer>.<place>`` (``agent.tool_effect``). They are part of the
simulator's vocabulary: ``docs/faults.md`` lists them.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NO_HAZARDS", "Hazards", "NoHazards"]


class Hazards(Protocol):
    def buggify(self, site: str, probability: float = 0.25) -> bool:
        """True when the simulation wants ``site``'s rare branch taken now; False in
        production."""
        ...

    async def point(self, site: str) -> None:
        """A risky point: a simulation may delay or crash the calling node here. Production
        returns at once, without a checkpoint."""
        ...


class NoHazards:
    """Production: nothing ever happens."""

    def buggify(self, site: str, probability: float = 0.25) -> bool:
        return False

    async def point(self, site: str) -> None:
        return None


NO_HAZARDS = NoHazards()
