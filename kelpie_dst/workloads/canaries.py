"""Canaries: workloads with planted bugs that the harness must find, replay and shrink.

Like TigerBeetle's canary, they exist to fail: ``tests/quality`` asserts that a sweep finds
each bug within a stated number of seeds, that the replay token reproduces it exactly, and
that shrinking removes faults or lowers the workload's size.

* :func:`lost_update`: read-modify-write of a shared counter without a transaction.
* :func:`duplicate_deposit`: a client that retries a deposit after a timeout, with no request
  id, so a slow (not lost) request is applied twice.
* :func:`udp_no_timeout`: a client that waits for a UDP reply forever; a datagram lost in a
  partition hangs it, so it never finishes after the faults heal.
* :func:`ack_before_durable`: a server that acknowledges a write when it is buffered in memory
  and flushes it to disk later; a crash in between loses acknowledged data.
"""

from __future__ import annotations

import trio

from kelpie_agent.storage import StorageError

from .._errors import NodeDownError
from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import open_kv

__all__ = [
    "ack_before_durable",
    "acknowledged_writes_durable",
    "counter_matches",
    "deposits_applied_once",
    "duplicate_deposit",
    "lost_update",
    "udp_no_timeout",
]

PORT = 7100


# -- lost update -------------------------------------------------------------------------------


@workload(
    params={"clients": 3, "increments": 4, "think": 2.0},
    sizes=("clients", "increments"),
    bounds={"clients": (1, 100), "increments": (1, 10_000), "think": (0, 60)},
)
async def lost_update(ctx: WorkloadContext) -> None:
    """Clients on their own nodes increment one counter in a shared database: get, then set."""
    sim = ctx.sim
    db = sim.add_node("db")
    ctx.state["db"] = db
    ctx.state["acked"] = 0
    done = trio.Event()
    left = [ctx.params["clients"]]

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

    for i in range(ctx.params["clients"]):
        sim.add_node(f"client-{i}", client)
    await done.wait()


@invariant
def counter_matches(ctx: WorkloadContext) -> None:
    stored = open_kv(ctx.state["db"]).store._get(b"counter")
    value = int(stored or b"0")
    assert value == ctx.state["acked"], f"counter is {value} after {ctx.state['acked']} increments"


# -- non-idempotent retry ----------------------------------------------------------------------


async def _ledger(node: Node) -> None:
    node.volatile["balance"] = 0

    async def handle(stream: trio.SocketStream) -> None:
        buffer = b""
        try:
            async for data in stream:
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    node.volatile["balance"] += int(line)  # BUG: no request id, no dedup
                    await stream.send_all(b"ok\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    await trio.serve_tcp(handle, PORT)


@workload(
    params={"deposits": 8, "timeout": 0.5},
    sizes=("deposits",),
    bounds={"deposits": (1, 10_000), "timeout": (0.001, 60)},
)
async def duplicate_deposit(ctx: WorkloadContext) -> None:
    """One client deposits 1 unit ``deposits`` times, retrying any attempt that times out."""
    ledger = ctx.sim.add_node("ledger", _ledger)
    ctx.state.update(ledger=ledger, acked=0)
    await trio.sleep(0.01)
    for _ in range(ctx.params["deposits"]):
        while True:
            try:
                with trio.fail_after(ctx.params["timeout"]):
                    stream = await trio.open_tcp_stream("ledger", PORT)
                    async with stream:
                        await stream.send_all(b"1\n")
                        reply = await stream.receive_some(16)
                if reply == b"ok\n":
                    break
            except (OSError, trio.BrokenResourceError, trio.TooSlowError):
                pass
            await trio.sleep(0.1)  # BUG: retries a request that may already be applied
        ctx.state["acked"] += 1


@invariant
def deposits_applied_once(ctx: WorkloadContext) -> None:
    balance = ctx.state["ledger"].volatile.get("balance")
    assert balance == ctx.state["acked"], f"balance {balance} after {ctx.state['acked']} deposits"


# -- missing timeout ---------------------------------------------------------------------------


async def _udp_echo(node: Node) -> None:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    await sock.bind(("0.0.0.0", PORT))
    while True:
        data, source = await sock.recvfrom(512)
        await sock.sendto(data, source)


@workload(
    params={"requests": 20, "interval": 0.5},
    sizes=("requests",),
    bounds={"requests": (1, 10_000), "interval": (0, 60)},
)
async def udp_no_timeout(ctx: WorkloadContext) -> None:
    """A client asks an echo server ``requests`` times over UDP and waits for each answer."""
    ctx.sim.add_node("echo", _udp_echo)
    await trio.sleep(0.01)
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    with sock:
        await sock.connect(("echo", PORT))
        for i in range(ctx.params["requests"]):
            await sock.send(str(i).encode())
            while int(await sock.recv(512)) != i:  # BUG: no timeout, no resend
                pass
            ctx.count("answers")
            await trio.sleep(ctx.params["interval"])


# -- acknowledged before durable ---------------------------------------------------------------


async def _buffered_store(node: Node) -> None:
    node.volatile["buffer"] = []
    kv = open_kv(node)
    while True:
        await trio.sleep(1.0)
        buffer: list[bytes] = node.volatile["buffer"]
        while buffer:
            key = buffer[0]
            try:
                await kv.set(key, b"1")
            except StorageError:
                break
            buffer.pop(0)


@workload(
    params={"writes": 12, "think": 0.5},
    sizes=("writes",),
    bounds={"writes": (1, 10_000), "think": (0, 60)},
)
async def ack_before_durable(ctx: WorkloadContext) -> None:
    """A client writes keys through a server that acknowledges them once they are buffered."""
    server = ctx.sim.add_node("store", _buffered_store)
    acked: list[bytes] = []
    ctx.state.update(server=server, acked=acked)
    rng = ctx.rng("client")
    await trio.sleep(0.01)
    for i in range(ctx.params["writes"]):
        key = f"key/{i}".encode()
        while True:
            try:
                server.check_alive()
                server.volatile["buffer"].append(key)  # BUG: acknowledged before durable
                break
            except (NodeDownError, KeyError):
                await trio.sleep(0.2)
        acked.append(key)
        await trio.sleep(ctx.params["think"] * rng.random())
    while not server.alive or server.volatile.get("buffer"):
        await trio.sleep(0.5)  # wait for the last flush


@invariant
def acknowledged_writes_durable(ctx: WorkloadContext) -> None:
    store = open_kv(ctx.state["server"]).store
    lost = [k.decode() for k in ctx.state["acked"] if store._get(k) is None]
    assert not lost, f"acknowledged writes lost: {', '.join(lost)}"
