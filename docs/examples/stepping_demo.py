"""open_simulation: driving a persistent simulation step by step (docs/api.md).

Run: python stepping_demo.py
"""

from __future__ import annotations

import time

import trio

import kelpie_dst


async def ticker(node: kelpie_dst.Node) -> None:
    while True:
        await trio.sleep(1)
        node.durable["ticks"] = node.durable.get("ticks", 0) + 1


async def wait_for_nothing() -> None:
    await trio.Event().wait()  # nothing can ever set it


async def double(x: int) -> int:
    await trio.sleep(0.5)
    return 2 * x


def main() -> None:
    with kelpie_dst.open_simulation(seed=7) as handle:
        sim = handle.sim
        node = sim.add_node("ticker", ticker)  # from the host: boots at the next step
        print("after add_node:", node.state, "time", handle.time)

        print("step returns:", handle.step(double, 21), "time", handle.time)
        handle.advance(2)
        print("after advance(2):", node.durable, "time", handle.time)

        time.sleep(0.1)  # real time passes on the host...
        print("after a real sleep: time", handle.time)  # ...virtual time does not

        sim.crash(node)  # from the host: applies at the next step
        print("after crash() from the host:", node.state)
        handle.settle()  # runs what can run now, without moving virtual time
        print("after settle():", node.state, "time", handle.time)

        sim.restart(node, after=1)
        handle.advance(1.5)
        print("after restart + advance(1.5):", node, node.durable)
        print("trace hash:", handle.trace_hash)

    handle = kelpie_dst.open_simulation(seed=7)
    try:
        handle.step(wait_for_nothing)
    except kelpie_dst.LivenessError as error:
        print("LivenessError:", error)
        print(error.report)
    print("closed:", handle.closed)


if __name__ == "__main__":
    main()
