"""The thread rows of issue #14's table, each run twice in this process and in fresh ones.

ThreadPoolExecutor and a queue consumer hung forever when threads ran inline;
trio.from_thread.run inside trio.to_thread.run_sync failed (exit 3); --strict on a thread pool
named concurrent/futures/thread.py instead of the user's line.
"""

from __future__ import annotations

import pytest

import kelpie_dst
from kelpie_dst import FailureKind
from tests.threads import programs


@pytest.mark.parametrize(
    "name", ["thread_pool", "queue_consumers", "from_thread_in_to_thread", "timers"]
)
def test_runs_and_is_deterministic_here_and_in_fresh_processes(name: str) -> None:
    main = getattr(programs, name)
    first = kelpie_dst.run(main, seed=4)
    assert first.ok, first.failure and first.failure.describe()
    again = kelpie_dst.run(main, seed=4)
    assert (again.trace_hash, again.value) == (first.trace_hash, first.value)
    kelpie_dst.assert_deterministic(main, seeds=[4], runs=3)  # the third run: a fresh process


def test_thread_pool_results_and_virtual_time() -> None:
    done, mapped, now = kelpie_dst.run(programs.thread_pool, seed=1).value  # type: ignore[misc]
    assert sorted(done) == [0, 1, 4, 9, 16, 25] and mapped == [0, 1, 4]
    assert now == 5.0  # sleeps of 0, 1 and 2 virtual seconds on three workers, then the map


def test_queue_consumers_get_every_item_once() -> None:
    results, now = kelpie_dst.run(programs.queue_consumers, seed=1).value  # type: ignore[misc]
    assert sorted(item for _name, item in results) == list(range(6))
    assert {name for name, _item in results} <= {"consumer-0", "consumer-1"}
    assert now == 3.0


def test_from_thread_re_enters_the_calling_task_while_tasks_keep_running() -> None:
    values, ticks = kelpie_dst.run(programs.from_thread_in_to_thread, seed=1).value  # type: ignore[misc]
    assert values == [2.0, 2.0, 3.5]  # from_thread.run slept 2s, time.sleep 1s, then 0.5s
    assert ticks == [0.75, 1.5, 2.25, 3.0, 3.75]  # other tasks ran meanwhile


def test_timer_fires_in_virtual_time_and_a_cancelled_one_never_does() -> None:
    fired, now = kelpie_dst.run(programs.timers, seed=1).value  # type: ignore[misc]
    assert fired == [("first", kelpie_dst._guards.MONOTONIC_OFFSET + 5.0)]
    assert now == 11.0


def test_strict_accepts_the_pool_and_names_the_users_line_for_a_leak_inside_it() -> None:
    result = kelpie_dst.run(programs.strict_pool_clock, seed=1, guards="strict")
    assert result.failure is not None and result.failure.kind is FailureKind.NONDETERMINISM
    message = result.failure.message
    assert f"programs.py:{programs.line_of('return time.time()')}" in message
    assert "concurrent" not in message and "threading" not in message


def test_seeds_choose_different_interleavings_of_threads() -> None:
    async def main() -> str:
        order: list[str] = []

        def work(tag: str) -> None:
            for _ in range(3):
                order.append(tag)

        import threading

        threads = [threading.Thread(target=work, args=(tag,)) for tag in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return "".join(order)

    outcomes = {kelpie_dst.run(main, seed=seed).value for seed in range(30)}
    assert len(outcomes) >= 3, outcomes
    assert all(sorted(str(o)) == sorted("aaabbb") for o in outcomes)


def test_threads_and_tasks_interleave_under_both_strategies() -> None:
    async def main() -> str:
        import threading

        import trio

        order: list[str] = []

        def thread_body() -> None:
            for _ in range(3):
                order.append("t")
                import time

                time.sleep(0)  # a scheduling point

        thread = threading.Thread(target=thread_body)
        thread.start()
        for _ in range(3):
            order.append("k")
            await trio.sleep(0)
        await trio.to_thread.run_sync(thread.join)
        return "".join(order)

    for strategy in ("random", "pct"):
        runs = [kelpie_dst.run(main, seed=seed, strategy=strategy) for seed in range(20)]
        assert all(r.ok for r in runs)
        assert len({r.value for r in runs}) >= 2, strategy
        again = kelpie_dst.run(main, seed=7, strategy=strategy)
        assert again.trace_hash == runs[7].trace_hash
