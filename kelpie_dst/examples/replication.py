"""A leader replicates numbered entries to three followers over TCP (docs/traces.md).

The main node is the leader. For each entry it sends one line to every follower, over one
connection per follower, and waits for each follower's ack; a timeout, reset or refused
connection closes the connection and retries on a new one, a few times. Followers keep what
they received on their disk, so a crash loses nothing they acknowledged.

Every message is traced as a ``repl.send`` / ``repl.recv`` pair and every ack as ``ack.send`` /
``ack.recv``, each with a ``msg`` field naming the message, which ``kelpie-dst trace html``
draws as arrows between the nodes' lanes::

    kelpie-dst run --entry kelpie_dst.examples.replication:main --seed 3 \\
        --fault process.crash=0.04 --fault network.partition=0.3 --fault network.delay=0.05 \\
        --trace replication.trace.gz
    kelpie-dst trace html replication.trace.gz -o replication.html
"""

from __future__ import annotations

import trio

import kelpie_dst

FOLLOWERS = ("f1", "f2", "f3")
PORT = 7000
ENTRIES = 40
INTERVAL = 0.25
TIMEOUT = 1.0
ATTEMPTS = 3
_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError)


async def follower(node: kelpie_dst.Node) -> None:
    sim = node.sim
    log = node.durable.setdefault("log", [])

    async def handle(stream: trio.SocketStream) -> None:
        try:
            async for data in stream:
                for line in data.decode().split():
                    msg = f"{line}:{node.name}"
                    sim.trace_event("repl.recv", msg=msg, entry=int(line))
                    if int(line) not in log:
                        log.append(int(line))
                    sim.trace_event("ack.send", msg=msg)
                    await stream.send_all(b"ok\n")
        except _ERRORS:
            pass  # the leader went away, or the network broke the connection

    await trio.serve_tcp(handle, PORT)


async def replicate(
    sim: kelpie_dst.Simulation, conns: dict[str, trio.SocketStream], name: str, entry: int
) -> bool:
    """Send ``entry`` to follower ``name`` until it acks, at most ``ATTEMPTS`` times."""
    msg = f"{entry}:{name}"
    for attempt in range(ATTEMPTS):
        try:
            with trio.fail_after(TIMEOUT):
                stream = conns.get(name)
                if stream is None:
                    stream = conns[name] = await trio.open_tcp_stream(name, PORT)
                sim.trace_event("repl.send", msg=msg, attempt=attempt)
                await stream.send_all(f"{entry}\n".encode())
                if not await stream.receive_some(64):
                    raise trio.BrokenResourceError("closed")
            sim.trace_event("ack.recv", msg=msg)
            return True
        except _ERRORS:
            broken = conns.pop(name, None)
            if broken is not None:
                with trio.CancelScope(shield=True):
                    await broken.aclose()
    return False


async def main(sim: kelpie_dst.Simulation, entries: int = ENTRIES) -> dict[str, int]:
    """Replicate ``entries`` entries; return how many each follower acknowledged."""
    for name in FOLLOWERS:
        sim.add_node(name, follower)
    await trio.sleep(0.01)
    conns: dict[str, trio.SocketStream] = {}
    acked = dict.fromkeys(FOLLOWERS, 0)

    async def one(name: str, entry: int) -> None:
        if await replicate(sim, conns, name, entry):
            acked[name] += 1

    for entry in range(entries):
        async with trio.open_nursery() as nursery:
            for name in FOLLOWERS:
                nursery.start_soon(one, name, entry)
        kelpie_dst.log("entry done", entry=entry, acks=sum(acked.values()))
        await trio.sleep(INTERVAL)
    for node_name in FOLLOWERS:
        log = sim.node(node_name).durable.get("log", [])
        assert len(log) >= acked[node_name], f"{node_name} lost acknowledged entries"
    return acked
