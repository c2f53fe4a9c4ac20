"""``fast_deadlines`` (Dspeed-14): trio's deadline bookkeeping as a class, same behaviour."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import trio
import trio.testing

import kelpie_dst
from kelpie_dst import _trio_speed
from kelpie_dst._sched import RandomStrategy, installed_scheduler
from kelpie_dst._trio_speed import fast_deadlines

T = TypeVar("T")


def _method() -> object:
    return trio.CancelScope.__dict__["_might_change_registered_deadline"]


def test_the_copied_method_is_this_trios() -> None:
    """If a trio release changes the method, the copy is not used (and this test says so)."""
    assert _trio_speed._matches(_method()), (
        f"trio {trio.__version__} changed CancelScope._might_change_registered_deadline: "
        "update kelpie_dst/_trio_speed.py (its _ORIGINAL and _DeadlineChange) to match"
    )


def test_installed_during_a_simulation_and_restored_after() -> None:
    original = _method()
    seen: list[object] = []

    async def main() -> None:
        seen.append(trio.CancelScope.__dict__["_might_change_registered_deadline"])
        await trio.sleep(1)

    assert kelpie_dst.run(main, seed=1).ok
    assert seen == [_trio_speed._deadline_change]
    assert _method() is original
    with installed_scheduler(RandomStrategy(3)):
        assert _method() is _trio_speed._deadline_change
    assert _method() is original


def test_a_different_trio_keeps_its_own() -> None:
    original = _method()

    def inside() -> object:
        with fast_deadlines():
            return _method()

    assert _plain(inside) is original
    assert not _trio_speed._matches(lambda self: None)


def _timeline() -> list[tuple[str, float]]:
    """Deadlines set, moved, cancelled, nested and expired, in a trio run (the scheduler's
    order seeded, so that tasks woken at the same time run in the same order)."""
    events: list[tuple[str, float]] = []

    async def sleeper(name: str, delay: float) -> None:
        with trio.move_on_after(delay) as scope:
            await trio.sleep(delay * 2)
        events.append((name, trio.current_time()))
        assert scope.cancelled_caught

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(sleeper, f"s{n}", 0.5 + n % 3)
            with trio.CancelScope() as scope:
                scope.deadline = trio.current_time() + 10
                scope.deadline = trio.current_time() + 0.7  # moved earlier
                await trio.sleep_forever()
            events.append(("moved", trio.current_time()))
            with trio.move_on_after(5) as outer:
                with trio.move_on_after(1):
                    outer.cancel()  # cancelled from inside: the deadline leaves the table
                    await trio.sleep(3)
            events.append(("cancelled", trio.current_time()))
            try:
                with trio.fail_after(0.25):
                    await trio.sleep(1)
            except trio.TooSlowError:
                events.append(("too slow", trio.current_time()))

    with installed_scheduler(RandomStrategy(7)):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return events


def _plain(fn: Callable[[], T]) -> T:
    """``fn()`` with trio's own method in every cancel scope."""
    saved = _trio_speed._USABLE[:]
    _trio_speed._USABLE[:] = [False]
    try:
        return fn()
    finally:
        _trio_speed._USABLE[:] = saved


def test_same_timeline_as_trios_own() -> None:
    want = _plain(_timeline)
    got = _timeline()
    assert got == want
    assert want == [
        ("s0", 0.5),
        ("s3", 0.5),
        ("moved", 0.7),
        ("cancelled", 0.7),
        ("too slow", 0.95),
        ("s1", 1.5),
        ("s4", 1.5),
        ("s2", 2.5),
    ]


def test_same_trace_as_trios_own_in_a_simulation() -> None:
    """In a simulation (trio in guest mode) every timer and scheduling decision is the same."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for n in range(6):
                nursery.start_soon(trio.sleep, 0.1 * (n % 3))
            with trio.move_on_after(0.15):
                await trio.sleep(1)
            with trio.CancelScope() as scope:
                scope.deadline = trio.current_time() + 3
                scope.deadline = trio.current_time() + 0.05
                await trio.sleep_forever()

    def hashes() -> list[str]:
        return [kelpie_dst.run(main, seed=s).trace_hash for s in range(4)]

    assert hashes() == _plain(hashes)
