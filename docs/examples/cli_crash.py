"""A program that dies of an unhandled exception in a child task (exit code 3; docs/cli.md)."""

from __future__ import annotations

import trio


async def lookup(table: dict[str, int], key: str) -> int:
    await trio.sleep(1)
    return table[key]


async def main() -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lookup, {"a": 1}, "b")
