"""A fault type of your own: register it, consult it in a shim, switch it on (docs/faults.md).

Run: python custom_fault.py
"""

from __future__ import annotations

import trio

import kelpie_dst
from kelpie_dst import Fault, FaultSpec, register_fault

DROP = register_fault(
    FaultSpec(
        "demo.drop",
        "a message to a node is silently dropped",
        params={"extra_delay": 0.0},
        swarm_range=(0.0, 0.2),
        observed="the receiver never sees the message; the sender is not told",
    )
)


async def send(sim: kelpie_dst.Simulation, inbox: list[int], target: str, message: int) -> None:
    """A toy shim: every send asks the injector whether demo.drop fires for this target."""
    fault = sim.faults.fires(DROP.name, node=target, message=message)
    if fault is not None:
        return  # dropped (traced as a "fault" event)
    await trio.sleep(0.01)
    inbox.append(message)


async def main(sim: kelpie_dst.Simulation) -> dict[str, list[int]]:
    inboxes: dict[str, list[int]] = {"a": [], "b": []}
    for message in range(10):
        for target, inbox in inboxes.items():
            await send(sim, inbox, target, message)
        await trio.sleep(1)
    return inboxes


if __name__ == "__main__":
    # Only node "a", only during virtual seconds [2, 6), each send with probability 0.5.
    fault = Fault("demo.drop", 0.5, start=2.0, end=6.0, nodes=("a",))
    result = kelpie_dst.run(main, seed=1, faults=[fault])
    print("faults:", [f.describe() for f in result.faults])
    print("fired:", dict(result.faults_fired))
    print("inboxes:", result.value)
    print(result.summary_line())
    print("swarm profiles:")
    for seed in range(4):
        profile = kelpie_dst.FaultPlan(swarm=True).resolve(seed)
        print(f"  seed {seed}:", ", ".join(f.describe() for f in profile) or "(none)")
