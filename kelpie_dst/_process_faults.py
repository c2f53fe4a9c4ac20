"""The process fault domain: random crashes and pauses of simulated nodes.

A nemesis task wakes every ``interval`` virtual seconds and, for each live node other than the
one running the whole-run ``main``, draws once per enabled fault type. Crashed nodes restart after
``restart_after`` seconds; paused nodes resume after ``duration`` seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._faults import FaultSpec, register_fault

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["nemesis"]

CRASH = register_fault(
    FaultSpec(
        "process.crash",
        "a node crashes: its tasks are cancelled and its ports refuse I/O; it restarts later",
        params={"interval": 1.0, "restart_after": 2.0},
        swarm_range=(0.0, 0.05),
        observed="peers see connection resets; the node reboots with its durable state only",
    )
)
PAUSE = register_fault(
    FaultSpec(
        "process.pause",
        "a node freezes (like SIGSTOP) and resumes after a while",
        params={"interval": 1.0, "duration": 1.0},
        swarm_range=(0.0, 0.05),
        observed="the node's timers and I/O stall, then everything it missed arrives at once",
    )
)


async def nemesis(sim: Simulation) -> None:
    """Inject process faults until the run ends (started only when one is enabled)."""
    faults = sim.faults
    interval = min(
        fault.param("interval")
        for name in (CRASH.name, PAUSE.name)
        for fault in faults.active.get(name, ())
    )
    while True:
        await trio.sleep(interval)
        if faults.healed:
            return
        for node in sim.nodes:
            if node.name == sim.main_node_name or not node.alive or node.paused:
                continue
            crash = faults.fires(CRASH.name, node=node.name)
            if crash is not None:
                sim.crash(node)
                sim.restart(node, after=crash.param("restart_after"))
                continue
            pause = faults.fires(PAUSE.name, node=node.name)
            if pause is not None:
                sim.pause(node)
                sim.resume(node, after=pause.param("duration"))
