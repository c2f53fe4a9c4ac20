"""50 tasks interleaving through sleeps, locks, channels, events and cancellation.

Every interesting step is logged to the trace, so two runs have equal trace hashes only if they
interleaved identically.
"""

from __future__ import annotations

import trio
import trio.lowlevel

import kelpie_dst

TASKS = 50


async def main() -> None:
    lock = trio.Lock()
    send, receive = trio.open_memory_channel[int](5)
    start = trio.Event()
    counter = [0]

    async def worker(i: int) -> None:
        await start.wait()
        for round_ in range(3):
            await trio.sleep(0.001 * (i % 7))
            async with lock:
                counter[0] += 1
                kelpie_dst.log("lock", worker=i, round=round_, counter=counter[0])
                await trio.lowlevel.checkpoint()
            await send.send(i)
            if i % 10 == 0:
                with trio.move_on_after(0.002):
                    await trio.sleep(1)  # cancelled by the timeout
                    kelpie_dst.log("never", worker=i)
                kelpie_dst.log("timed out", worker=i, round=round_)

    async def consumer() -> None:
        got = 0
        async for value in receive:
            got += 1
            kelpie_dst.log("recv", value=value, n=got)
            if got % 13 == 0:
                await trio.sleep(0.0005)

    async with trio.open_nursery() as outer:
        outer.start_soon(consumer)
        async with send, trio.open_nursery() as nursery:
            for i in range(TASKS):
                nursery.start_soon(worker, i)
            await trio.sleep(0.01)
            start.set()
    assert counter[0] == TASKS * 3
