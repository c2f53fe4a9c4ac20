"""KV linearizability: clients on several nodes read, write and compare-and-set a few registers
in one shared SimKV database, and the history they observe must be linearizable.

Each client runs on one of the topology's nodes and talks to the database host
(``topology.database``) through :func:`kelpie_dst.open_kv`, so partitions, crashed hosts and
every ``storage.*`` fault apply. Every call is recorded in ``ctx.history`` (Jepsen style): an
error that guarantees nothing was applied drops the call; an unavailable database, or a crash
of the client's node in the middle of a call, leaves its outcome unknown. A node that crashes
restarts with its clients picking up their remaining operations under a new process id.
"""

from __future__ import annotations

import trio

from kelpie_agent.storage import StorageError, StorageUnavailableError

from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import FaultyKV, open_kv
from ._kv_clients import run_clients

__all__ = ["all_operations_issued", "kv_linearizability"]


@workload(
    params={"clients": 6, "ops": 20, "keys": 3, "think": 0.05, "cas_ratio": 0.3, "hold": 0.0},
    sizes=("clients", "ops", "keys"),
    bounds={
        "clients": (1, 200),
        "ops": (1, 100_000),
        "keys": (1, 10_000),
        "think": (0, 60),
        "cas_ratio": (0, 1),
        "hold": (0, 60),
    },
    backends=("sim", "sqlite"),
)
async def kv_linearizability(ctx: WorkloadContext) -> None:
    sim = ctx.sim
    clients, ops, keys = ctx.params["clients"], ctx.params["ops"], ctx.params["keys"]
    think, cas_ratio, hold = ctx.params["think"], ctx.params["cas_ratio"], ctx.params["hold"]
    nodes = ctx.topology.nodes or ("node-1",)
    db = sim.add_node(ctx.topology.database or "db")
    remaining = dict.fromkeys(range(clients), ops)
    ctx.state["remaining"] = remaining
    names = [f"k{i}" for i in range(keys)]

    async def client(node: Node, number: int) -> None:
        kv = open_kv(node, host=db)
        process = f"c{number}/{node.incarnation}"
        rng = ctx.rng(f"client/{number}")
        seen: dict[str, str | None] = {}
        while remaining[number] > 0:
            remaining[number] -= 1
            index = ops - remaining[number]
            key = rng.choice(names)
            draw = rng.random()
            if draw < 0.4:
                await _read(ctx, kv, process, key, seen)
            elif draw < 0.4 + cas_ratio:
                expected = seen.get(key) if rng.random() < 0.8 else f"c{number}.stale"
                held = hold * rng.random() if hold else 0.0
                await _cas(ctx, kv, process, key, expected, f"c{number}.{index}", held)
            else:
                await _write(ctx, kv, process, key, f"c{number}.{index}")
            await trio.sleep(think * rng.random())

    await run_clients(sim, nodes, remaining, client)


async def _read(
    ctx: WorkloadContext, kv: FaultyKV, process: str, key: str, seen: dict[str, str | None]
) -> None:
    handle = ctx.history.invoke(process, "read", key, time=trio.current_time())
    try:
        value = await kv.get(key.encode())
    except StorageError:
        ctx.history.fail(handle)
        ctx.count("ops.failed")
        return
    text = None if value is None else value.decode()
    seen[key] = text
    ctx.history.ok(handle, text, time=trio.current_time())
    ctx.count("ops.ok")


async def _write(ctx: WorkloadContext, kv: FaultyKV, process: str, key: str, value: str) -> None:
    handle = ctx.history.invoke(process, "write", key, value=value, time=trio.current_time())
    try:
        await kv.set(key.encode(), value.encode())
    except StorageUnavailableError:
        ctx.history.info(handle)
        ctx.count("ops.unknown")
        return
    except StorageError:
        ctx.history.fail(handle)
        ctx.count("ops.failed")
        return
    ctx.history.ok(handle, time=trio.current_time())
    ctx.count("ops.ok")


async def _cas(
    ctx: WorkloadContext,
    kv: FaultyKV,
    process: str,
    key: str,
    expected: str | None,
    value: str,
    held: float = 0.0,
) -> None:
    """Compare-and-set in one transaction; ``held`` seconds pass between its read and its
    write (a read-modify-write that works in between), so other commits land inside it."""
    handle = ctx.history.invoke(
        process, "cas", key, value=value, expected=expected, time=trio.current_time()
    )
    try:
        async with kv.transaction() as tx:
            current = await tx.get(key.encode())
            swapped = (None if current is None else current.decode()) == expected
            if held:
                await trio.sleep(held)
            if swapped:
                await tx.set(key.encode(), value.encode())
    except StorageUnavailableError:
        ctx.history.info(handle)
        ctx.count("ops.unknown")
        return
    except StorageError:
        ctx.history.fail(handle)
        ctx.count("ops.failed")
        return
    ctx.history.ok(handle, swapped, time=trio.current_time())
    ctx.count("ops.ok")


@invariant
def all_operations_issued(ctx: WorkloadContext) -> None:
    """Every client issued all of its operations (none stopped early)."""
    left = {c: n for c, n in ctx.state.get("remaining", {}).items() if n}
    assert not left, f"clients with operations left: {left}"
