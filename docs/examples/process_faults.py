"""What a node sees under process.crash and process.pause (docs/faults.md).

A node ticks every 0.25 virtual seconds and records each tick's time and incarnation on its disk.
The workload runs for 4.1 virtual seconds, then prints the ticks.

    kelpie-dst run --entry process_faults:main --seed 2 --fault process.pause=0.3
    kelpie-dst run --entry process_faults:main --seed 2 --fault process.crash=0.3
"""

from __future__ import annotations

import trio

import kelpie_dst


async def heartbeat(node: kelpie_dst.Node) -> None:
    ticks = node.durable.setdefault("ticks", [])
    while True:
        await trio.sleep(0.25)
        ticks.append((round(trio.current_time(), 3), node.incarnation))


async def main(sim: kelpie_dst.Simulation) -> None:
    node = sim.add_node("worker", heartbeat)
    await trio.sleep(4.1)
    print("ticks (time, incarnation):", node.durable["ticks"])
