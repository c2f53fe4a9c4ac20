"""Two tasks take two locks in opposite orders and wait for each other forever."""

from __future__ import annotations

import trio


async def main() -> None:
    a, b = trio.Lock(), trio.Lock()

    async def left() -> None:
        async with a:
            await trio.sleep(0.1)
            async with b:
                pass

    async def right() -> None:
        async with b:
            await trio.sleep(0.1)
            async with a:
                pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(left)
        nursery.start_soon(right)
