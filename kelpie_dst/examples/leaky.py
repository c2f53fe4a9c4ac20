"""Plain trio programs that leak nondeterminism (the wall clock, uuid4), and one with a thread.

Under ``--strict`` the first two fail with exit 4 and name the line; by default the simulator
redirects them. The thread is simulated (docs/threads.md), so ``--strict`` accepts it.
"""

from __future__ import annotations

import threading
import time
import uuid

import trio


async def uses_time() -> float:
    await trio.sleep(1)
    return time.time()


async def uses_uuid() -> str:
    await trio.sleep(1)
    return str(uuid.uuid4())


async def uses_thread() -> list[int]:
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(42))
    thread.start()
    thread.join()
    await trio.sleep(1)
    return results
