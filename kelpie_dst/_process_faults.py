"""The process fault domain: random crashes and pauses of simulated nodes.

A nemesis task wakes every ``interval`` virtual seconds and, for each live node other than the
one running the whole-run ``main``, draws once per enabled fault type. Crashed nodes restart after
``restart_after`` seconds; paused nodes resume after ``duration`` seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._faults import FaultSpec, register_fault
from ._storms import StormSpec, register_storm

if TYPE_CHECKING:
    from ._sim import Simulation

__all__ = ["CRASH", "CRASH_AT", "PAUSE", "nemesis"]

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
CRASH_AT = register_fault(
    FaultSpec(
        "process.crash_at",
        "a node crashes at a risky point of the code under test (a Hazards.point site: between "
        "a commit and its acknowledgement, between a tool's effect and its result's commit, "
        "...), not at a random moment; it restarts later",
        params={"restart_after": 2.0},
        swarm_range=(0.0, 0.05),
        observed="the same as process.crash, but exactly where the code marked a hazard; the "
        "trace's fault event names the site",
    )
)
STORM = register_storm(
    StormSpec(
        "process",
        "pauses longer than a lease, crashes anywhere and at risky points",
        (
            ("process.pause", 0.5, (("interval", 1.0), ("duration", 10.0))),
            ("process.crash", 0.3, (("interval", 1.0), ("restart_after", 3.0))),
            ("process.crash_at", 0.3, ()),
        ),
        length=(1.0, 3.0),
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
            crash = faults.fires(CRASH.name, node=node.name, periodic=True)
            if crash is not None:
                sim.crash(node)
                sim.restart(node, after=crash.param("restart_after"))
                continue
            pause = faults.fires(PAUSE.name, node=node.name, periodic=True)
            if pause is not None:
                sim.pause(node)
                sim.resume(node, after=pause.param("duration"))
