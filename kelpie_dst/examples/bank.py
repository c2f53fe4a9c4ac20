"""A bank on its own simulated node, and clients that transfer money through it.

The server keeps balances and the ids of applied transfers in ``node.durable`` (its disk), and
applies each transfer atomically. Clients send requests over a channel and wait for a reply with
a timeout; on timeout they retry with the same request id, so a transfer applied just before a
crash is not applied twice. Run it with crashes::

    kelpie-dst run --entry kelpie_dst.examples.bank:main --fault process.crash=0.3

The invariants: money is conserved, and every acknowledged transfer was applied exactly once.
"""

from __future__ import annotations

import math

import trio

import kelpie_dst

ACCOUNTS = 8
INITIAL = 100
CLIENTS = 5
TRANSFERS = 40
TIMEOUT = 0.5


class Bank:
    def __init__(self) -> None:
        send, receive = trio.open_memory_channel[
            tuple[str, int, int, int, trio.MemorySendChannel[bool]]
        ](math.inf)
        self.requests = send
        self._incoming = receive

    async def serve(self, node: kelpie_dst.Node) -> None:
        disk = node.durable
        disk.setdefault("balances", [INITIAL] * ACCOUNTS)
        disk.setdefault("applied", {})
        kelpie_dst.log("bank up", incarnation=node.incarnation)
        async for request_id, source, target, amount, reply in self._incoming:
            await trio.sleep(0.01)  # processing time
            applied: dict[str, bool] = disk["applied"]
            if request_id not in applied:
                balances: list[int] = disk["balances"]
                ok = balances[source] >= amount
                if ok:
                    balances[source] -= amount
                    balances[target] += amount
                applied[request_id] = ok  # durable together with the balances
            await trio.sleep(0.005)  # the reply leaves after the write (a crash here loses it)
            reply.send_nowait(applied[request_id])


async def client(
    bank: Bank, number: int, sim: kelpie_dst.Simulation, acked: dict[str, bool]
) -> None:
    rng = sim.rng(f"client/{number}")
    for i in range(TRANSFERS):
        request_id = f"c{number}-{i}"
        source, target = rng.sample(range(ACCOUNTS), 2)
        amount = rng.randrange(1, 40)
        while True:
            reply_send, reply_receive = trio.open_memory_channel[bool](1)
            bank.requests.send_nowait((request_id, source, target, amount, reply_send))
            with trio.move_on_after(TIMEOUT):
                acked[request_id] = await reply_receive.receive()
                break
            kelpie_dst.log("retry", request=request_id)
        await trio.sleep(rng.random() * 0.5)


async def main(sim: kelpie_dst.Simulation) -> None:
    bank = Bank()
    server = sim.add_node("bank", bank.serve)
    acked: dict[str, bool] = {}
    async with trio.open_nursery() as nursery:
        for number in range(CLIENTS):
            nursery.start_soon(client, bank, number, sim, acked)
    disk = server.durable
    total = sum(disk["balances"])
    assert total == ACCOUNTS * INITIAL, f"money not conserved: {total} != {ACCOUNTS * INITIAL}"
    assert len(acked) == CLIENTS * TRANSFERS, "some transfers were never acknowledged"
    for request_id, ok in acked.items():
        assert disk["applied"][request_id] == ok, f"{request_id} acknowledged {ok} but not applied"
    kelpie_dst.log("done", transfers=len(acked), succeeded=sum(acked.values()))
