"""SimHazards: the simulator's side of kelpie_agent's Hazards port (BUGGIFY and risky points).

* ``buggify(site)`` is :func:`kelpie_dst.buggify` under the name ``agent:<site>``: the seed
  switches each site on for the whole run (probability 0.25), then it fires with the given
  probability each time it is reached.
* ``point(site)`` first asks the ``process.crash_at`` fault: if it fires, the calling node
  crashes right there (and restarts ``restart_after`` seconds later), so crashes land exactly
  where they hurt: between a commit and its acknowledgement, between a tool's effect and the
  commit of its result. Otherwise the site may be buggified into a delay, usually short and
  sometimes longer than a lease (``long_delay``), so leases lapse and handoffs race exactly
  there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._process_faults import CRASH_AT

if TYPE_CHECKING:
    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["SimHazards"]

SHORT_DELAY = (0.01, 0.5)
LONG_DELAY = (4.0, 12.0)
LONG_SHARE = 0.2


class SimHazards:
    """The Hazards port for code running on ``node``."""

    def __init__(self, sim: Simulation, node: Node) -> None:
        self.sim = sim
        self.node = node

    def buggify(self, site: str, probability: float = 0.25) -> bool:
        return self.sim.buggify.fires(f"agent:{site}", probability)

    async def point(self, site: str) -> None:
        sim, node = self.sim, self.node
        fault = sim.faults.fires(CRASH_AT.name, node=node.name, site=site)
        if fault is not None and node.alive:
            sim.crash(node)
            sim.restart(node, after=fault.param("restart_after"))
            await trio.lowlevel.checkpoint()  # the node's scope is cancelled: this raises
            return
        if sim.buggify.fires(f"point:{site}", 0.25):
            rng = sim.rng("hazards/delay")
            low, high = LONG_DELAY if rng.random() < LONG_SHARE else SHORT_DELAY
            await trio.sleep(low + (high - low) * rng.random())
