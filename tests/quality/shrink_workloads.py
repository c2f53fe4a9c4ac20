"""Small programs with planted bugs for the shrinking tests (tests/scenario/test_shrink.py).

* :func:`spread_counter`: one client per topology node increments a counter on the database
  host with a get and a set (no transaction), so two nodes are enough to lose an update.
* :func:`overdraw`: the README's check-then-act race, failing at a known virtual time.
* :func:`never_done`: a periodic loop that never returns (a time-limit liveness failure).
"""

from __future__ import annotations

import trio

from kelpie_agent.storage import StorageError
from kelpie_dst import Node
from kelpie_dst.scenario import WorkloadContext, invariant, workload
from kelpie_dst.shims import open_kv


@workload(params={"increments": 4, "think": 1.0}, sizes=("increments",))
async def spread_counter(ctx: WorkloadContext) -> None:
    """Clients on the topology's nodes increment one counter: get, then set (the bug)."""
    sim = ctx.sim
    db = sim.add_node(ctx.topology.database or "db")
    ctx.state["db"] = db
    ctx.state["acked"] = 0
    done = trio.Event()
    names = ctx.topology.nodes or ("n1",)
    left = [len(names)]

    async def client(node: Node) -> None:
        kv = open_kv(node, host=db)
        rng = ctx.rng(node.name)
        for _ in range(ctx.params["increments"]):
            await trio.sleep(ctx.params["think"] * rng.random())
            while True:
                try:
                    value = int(await kv.get(b"counter") or b"0")
                    await kv.set(b"counter", str(value + 1).encode())  # BUG: not atomic
                    break
                except StorageError:
                    await trio.sleep(0.1)
            ctx.state["acked"] += 1
        left[0] -= 1
        if not left[0]:
            done.set()

    for name in names:
        sim.add_node(name, client)
    await done.wait()


@invariant
def spread_counter_matches(ctx: WorkloadContext) -> None:
    value = int(open_kv(ctx.state["db"]).store._get(b"counter") or b"0")
    assert value == ctx.state["acked"], f"counter is {value} after {ctx.state['acked']} increments"


async def overdraw() -> None:
    balance = {"value": 100}

    async def withdraw(amount: int) -> None:
        if balance["value"] >= amount:  # check...
            await trio.sleep(0.5)  # ...something awaits in between...
            balance["value"] -= amount  # ...act

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(withdraw, 60)
    await trio.sleep(3)
    assert balance["value"] >= 0, f"overdrawn: {balance['value']}"


async def never_done() -> None:
    while True:
        await trio.sleep(1)
