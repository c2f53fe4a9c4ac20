"""Plain programs with threads, importable by name (fresh-process determinism checks, the CLI).

Tests assert that reports name lines of this file (see :func:`line_of`).
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
import time

import trio

import kelpie_dst


def _log(message: str, **fields: object) -> None:
    kelpie_dst.log(message, **fields)


async def thread_pool() -> list[object]:
    """The issue's row: a ThreadPoolExecutor (it hung when threads ran inline)."""

    def square(n: int) -> int:
        time.sleep(n % 3)  # virtual seconds
        _log("square", n=n, thread=threading.current_thread().name)
        return n * n

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(square, n) for n in range(6)]
        done = [f.result() for f in concurrent.futures.as_completed(futures)]
        mapped = list(pool.map(square, range(3)))
    return [done, mapped, trio.current_time()]


async def queue_consumers() -> list[object]:
    """The issue's row: worker threads fed through queue.Queue.get() (it hung too)."""
    jobs: queue.Queue[int | None] = queue.Queue()
    results: list[tuple[str, int]] = []

    def consume() -> None:
        while True:
            item = jobs.get()
            if item is None:
                jobs.task_done()
                return
            results.append((threading.current_thread().name, item))
            jobs.task_done()

    workers = [threading.Thread(target=consume, name=f"consumer-{i}") for i in range(2)]
    for worker in workers:
        worker.start()
    for item in range(6):
        jobs.put(item)
        await trio.sleep(0.5)
    for _ in workers:
        jobs.put(None)
    jobs.join()
    for worker in workers:
        worker.join()
    return [results, trio.current_time()]


async def from_thread_in_to_thread() -> list[object]:
    """The issue's row: trio.from_thread.run inside trio.to_thread.run_sync (it was exit 3)."""

    async def later(seconds: float) -> float:
        await trio.sleep(seconds)
        return trio.current_time()

    def work() -> list[float]:
        first = trio.from_thread.run(later, 2.0)
        second = trio.from_thread.run_sync(trio.current_time)
        time.sleep(1)
        return [first, second, trio.from_thread.run(later, 0.5)]

    async with trio.open_nursery() as nursery:
        ticks: list[float] = []

        async def ticker() -> None:
            for _ in range(5):
                await trio.sleep(0.75)
                ticks.append(trio.current_time())

        nursery.start_soon(ticker)
        values = await trio.to_thread.run_sync(work)
    return [values, ticks]


async def timers() -> list[object]:
    """threading.Timer fires in virtual time; a cancelled one never does."""
    fired: list[tuple[str, float]] = []
    first = threading.Timer(5, lambda: fired.append(("first", time.monotonic())))
    cancelled = threading.Timer(3, lambda: fired.append(("cancelled", time.monotonic())))
    first.start()
    cancelled.start()
    await trio.sleep(1)
    cancelled.cancel()
    await trio.sleep(10)
    return [fired, trio.current_time()]


async def strict_pool_clock() -> float:
    """A pool function that reads the wall clock: --strict names this file's line."""

    def stamp() -> float:
        return time.time()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(stamp).result()


async def stuck_thread_read() -> None:
    """A thread blocked in a real read nobody answers: the watchdog names the line."""
    r, _w = os.pipe()

    def read() -> None:
        os.read(r, 1)

    thread = threading.Thread(target=read, name="reader")
    thread.start()
    await trio.sleep(1)
    thread.join()


async def stuck_loop_read() -> None:
    """The trio loop itself blocked in a real read."""
    r, _w = os.pipe()
    await trio.sleep(1)
    os.read(r, 1)


LOCK = threading.Lock()  # created before the run: a real lock


async def real_lock_held() -> None:
    """A lock created before the run, held by one thread while another wants it."""

    def work() -> None:
        with LOCK:
            time.sleep(1)

    workers = [threading.Thread(target=work) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


async def join_deadlock() -> None:
    """The trio loop joins a thread that waits forever: a deadlock, as a real program hangs."""
    jobs: queue.Queue[int] = queue.Queue()
    thread = threading.Thread(target=jobs.get, name="waiter")
    thread.start()
    thread.join()


async def left_running() -> None:
    """main returns while a non-daemon thread waits forever: the process would never exit."""
    jobs: queue.Queue[int] = queue.Queue()
    threading.Thread(target=jobs.get, name="forgotten").start()
    await trio.sleep(1)


def line_of(text: str, after: str = "") -> int:
    """The line of this file where ``text`` first appears (after ``after``), for reports."""
    with open(__file__) as source:
        lines = source.read().splitlines()
    start = next((i for i, line in enumerate(lines) if after in line), 0) if after else 0
    return next(i + 1 for i, line in enumerate(lines) if i >= start and text in line)
