"""KV write skew: clients on several nodes run read-modify-write transactions over pairs of
counters in one shared SimKV database (``kelpie_agent.storage``'s optimistic transactions), and
the history must be serializable.

The doctors-on-call rule: each pair ``(p.x, p.y)`` starts at ``initial`` each, and the rule is
``x + y >= 0``. A *withdraw* reads both counters of a pair and takes an amount off one of them
only if the pair's sum stays at or above zero: two withdraws that each read the pair before the
other committed, and each write a different counter, break the rule unless the store validates
what they *read*, not only what they write (write skew). A *deposit* reads one counter and adds
to it (a lost update if two commit from the same read); an *audit* reads a counter of two pairs
and writes nothing. ``hold`` seconds pass between a transaction's reads and its commit, so other
commits land inside it.

Every call's reads (which transaction wrote each version it saw), writes and outcome are
recorded; after the run the final state is read straight off the database host's store, and
two invariants check it: ``pairs_stay_covered`` (the rule) and ``history_serializable``
(:mod:`._kv_serial`: no lost update, no aborted read, an acyclic dependency graph).
"""

from __future__ import annotations

import attrs
import trio

from kelpie_agent.storage import StorageError, StorageUnavailableError

from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import FaultyKV, open_kv
from ._kv_clients import run_clients
from ._kv_scans import OwnWrite, check_own_writes, read_pair, toggle_flag
from ._kv_serial import Txn, check_serializable, parse_value

__all__ = [
    "history_serializable",
    "kv_write_skew",
    "pairs_stay_covered",
    "skew_ops_issued",
    "transactions_read_own_writes",
]

KINDS = ("withdraw", "deposit", "audit")


@workload(
    params={
        "clients": 6,
        "ops": 20,
        "pairs": 2,
        "initial": 2,
        "think": 0.3,
        "hold": 1.0,
        "scans": 0,
    },
    sizes=("clients", "ops", "pairs"),
    bounds={
        "clients": (1, 200),
        "ops": (1, 100_000),
        "pairs": (1, 1000),
        "initial": (0, 1_000_000),
        "think": (0, 60),
        "hold": (0, 60),
        "scans": (0, 2),
    },
    backends=("sim", "sqlite"),
)
async def kv_write_skew(ctx: WorkloadContext) -> None:
    sim = ctx.sim
    clients, ops, pairs = ctx.params["clients"], ctx.params["ops"], ctx.params["pairs"]
    think, hold, initial = ctx.params["think"], ctx.params["hold"], ctx.params["initial"]
    nodes = ctx.topology.nodes or ("node-1",)
    db = sim.add_node(ctx.topology.database or "db")
    remaining = dict.fromkeys(range(clients), ops)
    txns: list[Txn] = []
    own: list[OwnWrite] = []
    ctx.state.update(remaining=remaining, txns=txns, db=db, own_writes=own)
    scans = int(ctx.params["scans"])

    async def client(node: Node, number: int) -> None:
        kv = open_kv(node, host=db)
        rng = ctx.rng(f"client/{number}")
        while remaining[number] > 0:
            remaining[number] -= 1
            txn = Txn(f"T{number}.{ops - remaining[number]}", rng.choice(KINDS))
            txns.append(txn)
            pair = rng.randrange(pairs)
            if txn.kind == "withdraw":
                keys = [f"p{pair}.x", f"p{pair}.y"]
                target, amount = rng.choice(keys), rng.randint(1, initial + 1)
            elif txn.kind == "deposit":
                keys = [f"p{pair}.{rng.choice('xy')}"]
                target, amount = keys[0], rng.randint(1, 3)
            else:
                other = rng.randrange(pairs)
                keys = sorted({f"p{pair}.{rng.choice('xy')}", f"p{other}.{rng.choice('xy')}"})
                target, amount = "", 0
            chosen = None
            if scans:
                both = scans == 2  # scans in both directions, gets after the flag's toggle
                forward = both and rng.random() < 0.5
                chosen = _Scans(pair, number, own, forward=forward, read_back=both)
            await _run(kv, txn, keys, target, amount, hold * rng.random(), initial, chosen)
            ctx.count(f"txn.{txn.kind}.{txn.status}")
            await trio.sleep(think * rng.random())

    await run_clients(sim, nodes, remaining, client)
    ctx.metric("txns", len(txns))
    ctx.metric("txns.written", sum(1 for t in txns if t.status == "ok" and t.writes))


@attrs.frozen
class _Scans:
    """With ``scans`` (:mod:`._kv_scans`): the transaction's pair and client, and where its
    read-your-writes observation goes; with ``scans = 2``, whether its withdraw scans oldest
    first and reads its flag back with ``get`` (``read_back``)."""

    pair: int
    client: int
    own: list[OwnWrite]
    forward: bool = False
    read_back: bool = False


async def _run(
    kv: FaultyKV,
    txn: Txn,
    keys: list[str],
    target: str,
    amount: int,
    held: float,
    initial: int,
    scans: _Scans | None = None,
) -> None:
    """One transaction: read ``keys``, wait ``held`` seconds, then (withdraw, deposit) write
    ``target``, recording what it read and wrote in ``txn`` as it goes. With ``scans``, a
    withdraw reads its pair with one limited newest-first scan, and every transaction flips
    its client's flag key and records what its own scan then shows."""
    try:
        async with kv.transaction() as tx:
            values = {}
            if scans is not None and txn.kind == "withdraw":
                pair = await read_pair(tx, scans.pair, initial, forward=scans.forward)
                for key, (writer, number) in pair.items():
                    txn.reads[key], values[key] = writer, number
            else:
                for key in keys:
                    writer, values[key] = parse_value(await tx.get(key.encode()), initial)
                    txn.reads[key] = writer
            if held:
                await trio.sleep(held)
            if txn.kind == "withdraw" and sum(values.values()) - amount >= 0:
                txn.writes[target] = values[target] - amount
            elif txn.kind == "deposit":
                txn.writes[target] = values[target] + amount
            for key, number in txn.writes.items():
                await tx.set(key.encode(), f"{txn.id}:{number}".encode())
            if scans is not None:
                own = await toggle_flag(tx, scans.client, txn.id, read_back=scans.read_back)
                scans.own.append(own)
    except StorageUnavailableError:
        txn.status = "unknown"
        return
    except StorageError:
        txn.status = "fail"
        return
    txn.status = "ok"


def _final(ctx: WorkloadContext) -> dict[str, tuple[str, int]]:
    store = open_kv(ctx.state["db"]).store
    keys = [f"p{p}.{side}" for p in range(ctx.params["pairs"]) for side in "xy"]
    return {k: parse_value(store._get(k.encode()), ctx.params["initial"]) for k in keys}


@invariant
def pairs_stay_covered(ctx: WorkloadContext) -> None:
    """Every pair's counters add up to zero or more (the rule each withdraw checked)."""
    final = _final(ctx)
    broken = [
        f"p{p}: x {final[f'p{p}.x'][1]} + y {final[f'p{p}.y'][1]} < 0"
        f" (last written by {final[f'p{p}.x'][0]} and {final[f'p{p}.y'][0]})"
        for p in range(ctx.params["pairs"])
        if final[f"p{p}.x"][1] + final[f"p{p}.y"][1] < 0
    ]
    assert not broken, f"a pair's rule broken (write skew): {'; '.join(broken)}"


@invariant
def history_serializable(ctx: WorkloadContext) -> None:
    """Some serial order of the committed transactions explains every read and the final
    state: no lost update, no read of a failed transaction's write, no dependency cycle."""
    final = {key: writer for key, (writer, _) in _final(ctx).items()}
    problems = check_serializable(ctx.state["txns"], final)
    shown = "; ".join(problems[:3]) + (f"; ... ({len(problems)} in all)" if problems[3:] else "")
    assert not problems, f"the history is not serializable: {shown}"


@invariant
def transactions_read_own_writes(ctx: WorkloadContext) -> None:
    """A transaction's own range reads show what it wrote and deleted (``scans``)."""
    problems = check_own_writes(ctx.state.get("own_writes", []))
    assert not problems, f"a transaction did not read its own writes: {'; '.join(problems[:3])}"


@invariant
def skew_ops_issued(ctx: WorkloadContext) -> None:
    """Every client issued all of its transactions (none stopped early)."""
    left = {c: n for c, n in ctx.state.get("remaining", {}).items() if n}
    assert not left, f"clients with transactions left: {left}"
