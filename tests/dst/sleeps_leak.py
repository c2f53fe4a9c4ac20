"""Programs for tests/dst/test_trace_complete.py (importable by name, for fresh processes)."""

from __future__ import annotations

import itertools
import os
import random

import trio

import kelpie_dst

_runs = itertools.count()  # module state that survives from one run to the next


async def sleeps_leak() -> None:
    """The same total sleep, in 1, 2 or 4 sleeps: only the number of awaits leaks."""
    pieces = (1, 2, 4)[next(_runs) % 3]
    for _ in range(pieces):
        await trio.sleep(1.0 / pieces)
    kelpie_dst.log("done")


async def one_sleep_or_two() -> None:
    """1 or 2 sleeps (same total), as ``KELPIE_TEST_PIECES`` says."""
    pieces = int(os.environ.get("KELPIE_TEST_PIECES", "1"))
    for _ in range(pieces):
        await trio.sleep(1.0 / pieces)
    kelpie_dst.log("done")


async def extra_draw() -> None:
    """One more draw from the global random module when asked: nothing else changes."""
    if os.environ.get("KELPIE_TEST_DRAW") == "1":
        random.random()
    await trio.sleep(1)
