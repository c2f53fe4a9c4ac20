"""Plain threads in the simulator: a data race that only preemption can expose.

Two threads add to a shared counter by reading it on one line and writing it back on the next.
Nothing between the read and the write blocks, so without preemption the threads never
interleave there, and every run passes. The simulator's seeded preemption points (a few lines
apart, in the user's code) interleave them on some seeds, and an update is lost:

    kelpie-dst run --entry kelpie_dst.examples.threads:lost_update --seed 1

``locked_update`` is the fixed program: no seed fails it.
"""

from __future__ import annotations

import threading

THREADS = 2
INCREMENTS = 10


async def lost_update() -> int:
    counter = {"value": 0}

    def worker() -> None:
        for _ in range(INCREMENTS):
            value = counter["value"]  # read...
            counter["value"] = value + 1  # ...write: another thread may have written between

    _run_all(worker)
    assert counter["value"] == THREADS * INCREMENTS, f"lost updates: {counter['value']}"
    return counter["value"]


async def locked_update() -> int:
    counter = {"value": 0}
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(INCREMENTS):
            with lock:
                value = counter["value"]
                counter["value"] = value + 1

    _run_all(worker)
    assert counter["value"] == THREADS * INCREMENTS, f"lost updates: {counter['value']}"
    return counter["value"]


def _run_all(worker: object) -> None:
    threads = [threading.Thread(target=worker) for _ in range(THREADS)]  # type: ignore[arg-type]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
