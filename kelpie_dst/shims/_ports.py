"""Simulated time, id and randomness ports for kelpie_agent (mirrors kelpie_agent/ports)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kelpie_agent.ports import Ports, SeededIds

from .._public import current_simulation
from ._hazards import SimHazards

if TYPE_CHECKING:
    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["sim_ports"]


def sim_ports(node: Node | None = None, *, sim: Simulation | None = None) -> Ports:
    """Ports for code running on ``node`` (default: the calling task's node).

    The clock is the node's wall clock (epoch + virtual time + the node's ``clock.*`` skew);
    ids and randomness come from streams named after the node and its incarnation, so a
    restarted node never repeats the ids of its previous life. Its hazards are the run's
    BUGGIFY sites and ``process.crash_at`` points (:class:`~._hazards.SimHazards`).
    """
    sim = sim or current_simulation()
    if sim is None:
        raise RuntimeError("sim_ports() needs a running simulation")
    node = node or sim.current_node()
    if node is None:
        raise RuntimeError("sim_ports() outside a node: pass the node")
    life = f"{node.name}/{node.incarnation}"
    return Ports(
        clock=node.clock,
        ids=SeededIds(sim.rng(f"ids/{life}")),
        rng=sim.rng(f"agent-rng/{life}"),
        hazards=SimHazards(sim, node),
    )
