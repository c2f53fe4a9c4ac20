"""Per-node wall clocks and the clock fault domain (``clock.skew``, ``clock.jump``).

trio's monotonic time is virtual and never skewed. Wall-clock time (epoch seconds) is what a
node's clock port reports, and what the guards serve for ``time.time()`` on that node: the
configured epoch, plus virtual time, plus the node's skew, plus any jumps it has taken.

* ``clock.skew``: when a node boots for the first time, with the fault's probability, its clock
  gets a constant offset drawn uniformly from ``[-max_skew, +max_skew]`` seconds.
* ``clock.jump``: every ``interval`` seconds, with the fault's probability, one node's clock
  steps forward or backward by up to ``max_jump`` seconds (NTP corrections, VM migrations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._faults import FaultSpec, register_fault
from ._storms import StormSpec, register_storm

if TYPE_CHECKING:
    from ._nodes import Node
    from ._sim import Simulation

__all__ = ["NodeClock"]

SKEW = register_fault(
    FaultSpec(
        "clock.skew",
        "a node's wall clock runs at a constant offset from the others",
        params={"max_skew": 5.0},
        swarm_range=(0.0, 1.0),
        observed="time.time() and Clock.now() on that node differ from other nodes' by up to "
        "max_skew seconds; trio.current_time() is unaffected",
    )
)
JUMP = register_fault(
    FaultSpec(
        "clock.jump",
        "a node's wall clock steps forward or backward at some moment",
        params={"interval": 10.0, "max_jump": 30.0},
        swarm_range=(0.0, 0.2),
        observed="successive time.time() readings on that node can go backwards or leap ahead",
    )
)
STORM = register_storm(
    StormSpec(
        "clock",
        "wall clocks jump by up to 12 s, across lease deadlines",
        (("clock.jump", 1.0, (("interval", 1.0), ("max_jump", 12.0))),),
        length=(1.0, 3.0),
    )
)


class NodeClock:
    """A node's wall-clock port: ``now()`` in epoch seconds."""

    def __init__(self, sim: Simulation, node: Node) -> None:
        self._sim = sim
        self.node = node
        self.offset = 0.0  # skew plus jumps so far
        skew = sim.faults.fires(SKEW.name, node=node.name)
        if skew is not None:
            max_skew = skew.param("max_skew")
            self.offset = (2 * sim.rng(f"clock/{node.name}").random() - 1) * max_skew
            sim.trace_event("clock.skew", node=node.name, offset=self.offset)

    def now(self) -> float:
        return self._sim.config.epoch + self._sim.now() + self.offset

    def jump(self, seconds: float) -> None:
        self.offset += seconds
        self._sim.trace_event("clock.jump", node=self.node.name, seconds=seconds)


async def clock_nemesis(sim: Simulation) -> None:
    """Make node clocks jump while ``clock.jump`` is enabled."""
    faults = sim.faults
    interval = min(f.param("interval") for f in faults.active.get(JUMP.name, ()))
    rng = sim.rng("clock/nemesis")
    while not faults.healed:
        await trio.sleep(interval)
        for node in sim.nodes:
            jump = faults.fires(JUMP.name, node=node.name, periodic=True)
            if jump is not None:
                node.clock.jump((2 * rng.random() - 1) * jump.param("max_jump"))
