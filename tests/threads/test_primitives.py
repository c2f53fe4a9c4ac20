"""Every simulated blocking primitive: it blocks, wakes and times out in virtual time.

Each program runs in the simulator; the helpers record (virtual time, what) pairs, so the
assertions are about the simulated schedule, not about real time.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

import kelpie_dst


def run(main: Callable[[], Awaitable[Any]], seed: int = 1) -> Any:
    result = kelpie_dst.run(main, seed=seed)
    assert result.ok, result.failure and result.failure.describe()
    again = kelpie_dst.run(main, seed=seed)
    assert again.trace_hash == result.trace_hash
    return result.value


def now() -> float:
    sim = kelpie_dst.current_simulation()
    assert sim is not None
    return sim.now()


def start(*targets: Callable[[], object]) -> list[threading.Thread]:
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.start()
    return threads


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join()


def test_lock_blocks_until_released_and_times_out() -> None:
    async def main() -> list[object]:
        lock = threading.Lock()
        seen: list[object] = []

        def holder() -> None:
            with lock:
                time.sleep(2)

        def waiter() -> None:
            time.sleep(0.5)
            seen.append(("timeout", lock.acquire(timeout=1), now()))
            with lock:
                seen.append(("acquired", now()))

        join(start(holder, waiter))
        seen.append(("locked", lock.locked(), lock.acquire(False)))
        return seen

    assert run(main) == [("timeout", False, 1.5), ("acquired", 2.0), ("locked", False, True)]


def test_lock_errors_are_the_standard_librarys() -> None:
    async def main() -> list[str]:
        lock = threading.Lock()
        errors = []
        for call in (lock.release, lambda: lock.acquire(False, 1), lambda: lock.acquire(True, -2)):
            try:
                call()
            except (RuntimeError, ValueError) as error:
                errors.append(f"{type(error).__name__}: {error}")
        return errors

    assert run(main) == [
        "RuntimeError: release unlocked lock",
        "ValueError: can't specify a timeout for a non-blocking call",
        "ValueError: timeout value must be positive",
    ]


def test_rlock_is_reentrant_owned_and_blocks_others() -> None:
    async def main() -> list[object]:
        rlock = threading.RLock()
        seen: list[object] = []

        def owner() -> None:
            with rlock, rlock:
                time.sleep(1)

        def other() -> None:
            time.sleep(0.1)
            try:
                rlock.release()
            except RuntimeError as error:
                seen.append(str(error))
            with rlock:
                seen.append(now())

        join(start(owner, other))
        return seen

    assert run(main) == ["cannot release un-acquired lock", 1.0]


def test_condition_wakes_waiters_in_order_and_times_out() -> None:
    async def main() -> list[object]:
        cond = threading.Condition()
        woken: list[object] = []

        def waiter(tag: str) -> Callable[[], None]:
            def body() -> None:
                with cond:
                    lined_up.append(tag)
                    woken.append((tag, cond.wait(timeout=10), now()))

            return body

        lined_up: list[str] = []
        threads = start(waiter("a"), waiter("b"), waiter("c"))
        time.sleep(1)  # the trio loop blocks a virtual second; the waiters get in line
        with cond:
            cond.notify()
        time.sleep(1)
        with cond:
            cond.notify_all()
        join(threads)
        with cond:
            woken.append(("alone", cond.wait(timeout=3), now()))
        return [lined_up, woken]

    for seed in range(1, 4):
        lined_up, woken = run(main, seed)
        first, second, third = lined_up
        assert woken[0] == (first, True, 1.0)  # notify() wakes the longest waiting thread
        assert sorted(woken[1:3]) == sorted([(second, True, 2.0), (third, True, 2.0)])
        assert woken[3] == ("alone", False, 5.0)


def test_event_wait_set_and_timeout() -> None:
    async def main() -> list[object]:
        event = threading.Event()
        seen: list[object] = []

        def waiter() -> None:
            seen.append(("first", event.wait(timeout=1), now()))
            seen.append(("second", event.wait(), now()))

        threads = start(waiter)
        await trio.sleep(4)
        event.set()
        join(threads)
        return seen

    assert run(main) == [("first", False, 1.0), ("second", True, 4.0)]


def test_semaphores_limit_concurrency_and_bounded_refuses_over_release() -> None:
    async def main() -> list[object]:
        sem = threading.Semaphore(2)
        inside = [0]
        most = [0]

        def worker() -> None:
            with sem:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                time.sleep(1)
                inside[0] -= 1

        join(start(*[worker] * 5))
        bounded = threading.BoundedSemaphore(1)
        try:
            bounded.release()
        except ValueError as error:
            return [most[0], now(), str(error)]
        return [most[0], now(), None]

    assert run(main) == [2, 3.0, "Semaphore released too many times"]


def test_barrier_releases_together_and_breaks_on_timeout() -> None:
    async def main() -> list[object]:
        barrier = threading.Barrier(3)
        passed: list[float] = []

        def party(delay: float) -> Callable[[], None]:
            def body() -> None:
                time.sleep(delay)
                barrier.wait()
                passed.append(now())

            return body

        join(start(party(1), party(2), party(3)))
        lonely = threading.Barrier(2, timeout=1.5)
        try:
            lonely.wait()
        except threading.BrokenBarrierError:
            return [passed, now(), "broken"]
        return [passed, now(), "passed"]

    assert run(main) == [[3.0, 3.0, 3.0], 4.5, "broken"]


def test_queue_kinds_order_block_and_time_out() -> None:
    async def main() -> list[object]:
        out: list[object] = []
        for kind in (queue.Queue, queue.LifoQueue, queue.PriorityQueue, queue.SimpleQueue):
            q: Any = kind()
            for item in (2, 1, 3):
                q.put(item)
            out.append([q.get() for _ in range(3)])
            try:
                q.get(timeout=0.5)
            except queue.Empty:
                out.append(now())
        bounded: queue.Queue[int] = queue.Queue(maxsize=1)
        bounded.put(1)
        try:
            bounded.put(2, timeout=2)
        except queue.Full:
            out.append(("full", now()))

        tasks: queue.Queue[int] = queue.Queue()

        def worker() -> None:
            while True:
                tasks.get()
                time.sleep(1)
                tasks.task_done()

        threading.Thread(target=worker, daemon=True).start()
        for item in range(3):
            tasks.put(item)
        tasks.join()
        out.append(("joined", now()))
        return out

    assert run(main) == [
        [2, 1, 3],
        0.5,
        [3, 1, 2],
        1.0,
        [1, 2, 3],
        1.5,
        [2, 1, 3],
        2.0,
        ("full", 4.0),
        ("joined", 7.0),
    ]


def test_time_sleep_is_virtual_in_threads_and_blocks_the_loop_in_tasks() -> None:
    async def main() -> list[object]:
        seen: list[object] = []

        async def task() -> None:
            for _ in range(3):
                await trio.sleep(1)
                seen.append(("task", now()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(task)
            await trio.sleep(0.5)
            time.sleep(2)  # the whole loop blocks two virtual seconds: the task falls behind
            seen.append(("slept", now()))
        join(start(lambda: time.sleep(5)))
        seen.append(("thread", now()))
        try:
            time.sleep(-1)
        except ValueError as error:
            seen.append(str(error))
        return seen

    assert run(main) == [
        ("slept", 2.5),
        ("task", 2.5),  # due at 1.0, but the loop was blocked until 2.5
        ("task", 3.5),
        ("task", 4.5),
        ("thread", 9.5),
        "sleep length must be non-negative",
    ]


def test_join_with_timeout_identity_and_errors() -> None:
    async def main() -> list[object]:
        seen: list[object] = []

        def body() -> None:
            seen.append(threading.current_thread().name)
            time.sleep(3)

        thread = threading.Thread(target=body, name="sleeper")
        try:
            thread.join()
        except RuntimeError as error:
            seen.append(str(error))
        thread.start()
        seen.append((thread.is_alive(), thread.ident is not None, thread in threading.enumerate()))
        thread.join(timeout=1)
        seen.append((thread.is_alive(), now()))
        thread.join()
        seen.append((thread.is_alive(), now(), thread in threading.enumerate()))
        return seen

    assert run(main) == [
        "cannot join thread before it is started",
        (True, True, True),
        "sleeper",
        (True, 1.0),
        (False, 3.0, False),
    ]


def test_futures_wait_as_completed_result_timeout_and_shutdown() -> None:
    async def main() -> list[object]:
        seen: list[object] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            slow = pool.submit(time.sleep, 5)
            quick = pool.submit(lambda: time.sleep(1) or "quick")
            done, pending = concurrent.futures.wait(
                [slow, quick], return_when=concurrent.futures.FIRST_COMPLETED
            )
            seen.append(([f is quick for f in done], len(pending), now()))
            try:
                slow.result(timeout=1)
            except concurrent.futures.TimeoutError:
                seen.append(("timeout", now()))
            order = [f is slow for f in concurrent.futures.as_completed([slow, quick])]
            seen.append((order, now()))
        queued = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        first = queued.submit(time.sleep, 2)
        second = queued.submit(time.sleep, 2)
        time.sleep(0.5)  # the worker picks up the first job
        queued.shutdown(wait=True, cancel_futures=True)
        seen.append((first.done(), second.cancelled(), now()))
        return seen

    assert run(main) == [
        ([True], 1, 1.0),
        ("timeout", 2.0),
        ([False, True], 5.0),
        (True, True, 7.0),
    ]


def test_an_exception_in_a_thread_goes_to_excepthook_and_the_run_goes_on() -> None:
    async def main() -> list[str]:
        hooked: list[str] = []
        previous = threading.excepthook
        threading.excepthook = lambda args: hooked.append(
            f"{args.exc_type.__name__}: {args.exc_value}"
        )
        try:

            def boom() -> None:
                raise KeyError("boom")

            join(start(boom))
        finally:
            threading.excepthook = previous
        return hooked

    assert run(main) == ["KeyError: 'boom'"]


@pytest.mark.parametrize("seed", [1, 2])
def test_thread_names_do_not_depend_on_earlier_runs(seed: int) -> None:
    async def main() -> list[str]:
        threads = start(lambda: None, lambda: None)
        join(threads)
        with concurrent.futures.ThreadPoolExecutor() as pool:
            pool.submit(lambda: None).result()
            names = [t.name for t in pool._threads]  # type: ignore[attr-defined]
        return [t.name for t in threads] + names

    assert run(main, seed) == [
        "Thread-1 (<lambda>)",
        "Thread-2 (<lambda>)",
        "ThreadPoolExecutor-0_0",
    ]
