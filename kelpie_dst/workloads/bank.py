"""The bank example as a scenario workload: a bank server on node ``bank`` keeps balances in
its own SimKV disk; ``clients`` clients transfer money over simulated TCP, retrying with the
same request id until each transfer is acknowledged (see :mod:`kelpie_dst.examples.bank`).

The scenario's liveness phase replaces the example's fixed heal time; the invariants are the
example's end-of-run checks, as named invariants.
"""

from __future__ import annotations

import trio

from ..examples import bank
from ..scenario import WorkloadContext, invariant, workload
from ..shims import SimKVStore, open_kv

__all__ = ["acknowledged_transfers_recorded", "bank_transfers", "money_conserved"]


@workload(params={"clients": bank.CLIENTS}, sizes=("clients",), bounds={"clients": (1, 100)})
async def bank_transfers(ctx: WorkloadContext) -> None:
    """Start the bank on node ``bank`` and run the clients until every transfer is acked."""
    server = ctx.sim.add_node("bank", bank.bank_node)
    acked: dict[str, bool] = {}
    ctx.state.update(server=server, acked=acked)
    async with trio.open_nursery() as nursery:
        for number in range(ctx.params["clients"]):
            nursery.start_soon(bank.client, number, ctx.sim, acked)
    ctx.metric("transfers.acknowledged", len(acked))
    ctx.metric("transfers.succeeded", sum(acked.values()))


def _store(ctx: WorkloadContext) -> SimKVStore:
    return open_kv(ctx.state["server"]).store


@invariant
def money_conserved(ctx: WorkloadContext) -> None:
    """The balances add up to what the bank started with."""
    store = _store(ctx)
    balances = [int(store._get(bank._account(i)) or b"0") for i in range(bank.ACCOUNTS)]
    assert sum(balances) == bank.ACCOUNTS * bank.INITIAL, f"money not conserved: {balances}"


@invariant
def acknowledged_transfers_recorded(ctx: WorkloadContext) -> None:
    """Every acknowledged transfer is recorded once, with the outcome the client was told."""
    store = _store(ctx)
    acked: dict[str, bool] = ctx.state["acked"]
    expected = ctx.params["clients"] * bank.TRANSFERS
    assert len(acked) == expected, f"{len(acked)} of {expected} transfers acknowledged"
    for rid, ok in sorted(acked.items()):
        recorded = store._get(f"applied/{rid}".encode())
        assert recorded == (b"1" if ok else b"0"), f"{rid} acknowledged {ok}, recorded {recorded!r}"
