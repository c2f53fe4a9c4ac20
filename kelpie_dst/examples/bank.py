"""A bank server on its own node, and clients that transfer money through it over TCP.

The server speaks line-delimited JSON over ``trio.serve_tcp`` and keeps balances in a KV store
on its own disk (``kelpie_dst.open_kv``), applying each transfer and recording its request id
in ONE transaction. Clients connect with ``trio.open_tcp_stream``, wait for each reply with a
timeout, and on any failure reconnect and retry with the same request id, so a transfer applied
just before a crash or a lost reply is never applied twice.

Run it with every kind of fault the simulator has so far::

    kelpie-dst run --entry kelpie_dst.examples.bank:main --seed 1 --swarm

The invariants, checked on the store at the end: money is conserved, every acknowledged
transfer is recorded with the outcome the client saw, and every client finished.
"""

from __future__ import annotations

import json

import trio

import kelpie_dst
from kelpie_agent.storage import StorageError

ACCOUNTS = 8
INITIAL = 100
CLIENTS = 4
TRANSFERS = 15
PORT = 9000
TIMEOUT = 2.0
HEAL_AT = 60.0  # virtual seconds of faults; then a liveness phase in which every client must finish


def _account(i: int) -> bytes:
    return f"account/{i}".encode()


async def bank_node(node: kelpie_dst.Node) -> None:
    kv = kelpie_dst.open_kv(node)
    while True:
        try:
            async with kv.transaction() as tx:
                if await tx.get(_account(0)) is None:
                    for i in range(ACCOUNTS):
                        await tx.set(_account(i), str(INITIAL).encode())
            break
        except StorageError:
            await trio.sleep(0.1)
    kelpie_dst.log("bank up", incarnation=node.incarnation)

    async def handle(stream: trio.SocketStream) -> None:
        buffer = b""
        try:
            while True:
                data = await stream.receive_some(4096)
                if not data:
                    return
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    reply = await transfer(json.loads(line))
                    await stream.send_all(json.dumps(reply).encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def transfer(request: dict[str, object]) -> dict[str, object]:
        rid, source, target, amount = (request[k] for k in ("id", "from", "to", "amount"))
        assert isinstance(source, int) and isinstance(target, int) and isinstance(amount, int)
        try:
            async with kv.transaction() as tx:
                done = await tx.get(f"applied/{rid}".encode())
                if done is not None:
                    return {"id": rid, "ok": done == b"1"}
                balance = int(await tx.get(_account(source)) or b"0")
                ok = balance >= amount
                if ok:
                    other = int(await tx.get(_account(target)) or b"0")
                    await tx.set(_account(source), str(balance - amount).encode())
                    await tx.set(_account(target), str(other + amount).encode())
                await tx.set(f"applied/{rid}".encode(), b"1" if ok else b"0")
            return {"id": rid, "ok": ok}
        except StorageError as error:
            return {"id": rid, "error": type(error).__name__}

    await trio.serve_tcp(handle, PORT)


async def client(number: int, sim: kelpie_dst.Simulation, acked: dict[str, bool]) -> None:
    rng = sim.rng(f"client/{number}")
    stream: trio.SocketStream | None = None
    buffer = b""
    for i in range(TRANSFERS):
        rid = f"c{number}-{i}"
        source, target = rng.sample(range(ACCOUNTS), 2)
        request = {"id": rid, "from": source, "to": target, "amount": rng.randrange(1, 40)}
        while rid not in acked:
            try:
                with trio.fail_after(TIMEOUT):
                    if stream is None:
                        stream, buffer = await trio.open_tcp_stream("bank", PORT), b""
                    await stream.send_all(json.dumps(request).encode() + b"\n")
                    while b"\n" not in buffer:
                        data = await stream.receive_some(4096)
                        if not data:
                            raise trio.BrokenResourceError("server closed the connection")
                        buffer += data
                line, buffer = buffer.split(b"\n", 1)
                reply = json.loads(line)
                if "ok" in reply:
                    acked[rid] = reply["ok"]
                    continue
            except (OSError, trio.BrokenResourceError, trio.TooSlowError):
                if stream is not None:
                    stream.socket.close()
                stream = None
            kelpie_dst.log("retry", request=rid)
            await trio.sleep(0.2 + rng.random())
        await trio.sleep(rng.random() * 0.5)


async def _heal_later(sim: kelpie_dst.Simulation) -> None:
    await trio.sleep(HEAL_AT)
    sim.heal()


async def _wait_for(acked: dict[str, bool]) -> None:
    """Wait until every transfer is acknowledged; after healing, that must happen soon."""
    while len(acked) < CLIENTS * TRANSFERS:
        await trio.sleep(1)
        if trio.current_time() > HEAL_AT + 120:
            raise kelpie_dst.LivenessError(
                f"only {len(acked)} of {CLIENTS * TRANSFERS} transfers were acknowledged "
                f"two minutes after every fault healed"
            )


async def main(sim: kelpie_dst.Simulation) -> None:
    bank = sim.add_node("bank", bank_node)
    acked: dict[str, bool] = {}
    async with trio.open_nursery() as nursery:
        for number in range(CLIENTS):
            nursery.start_soon(client, number, sim, acked)
        nursery.start_soon(_heal_later, sim)
        await _wait_for(acked)
        nursery.cancel_scope.cancel()
    store = kelpie_dst.open_kv(bank).store
    balances = [int(store._get(_account(i)) or b"0") for i in range(ACCOUNTS)]
    assert sum(balances) == ACCOUNTS * INITIAL, f"money not conserved: {balances}"
    assert len(acked) == CLIENTS * TRANSFERS, "some transfers were never acknowledged"
    for rid, ok in sorted(acked.items()):
        recorded = store._get(f"applied/{rid}".encode())
        assert recorded == (b"1" if ok else b"0"), f"{rid} acknowledged {ok}, recorded {recorded!r}"
    kelpie_dst.log("done", transfers=len(acked), succeeded=sum(acked.values()))
