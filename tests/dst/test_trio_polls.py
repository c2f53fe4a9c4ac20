"""``quiet_polls`` (Dspeed-16): trio's zero-timeout epoll skipped only when it can find nothing."""

from __future__ import annotations

from typing import Any

import trio
from trio._core._io_epoll import EpollIOManager
from trio._core._wakeup_socketpair import WakeupSocketpair

import kelpie_dst
from kelpie_dst import _trio_polls
from kelpie_dst._sched import RandomStrategy, installed_scheduler

_RUN: Any = trio._core._run


def test_the_copied_methods_are_this_trios() -> None:
    """If a trio release changes one of them, the copies are not used (and this test says so)."""
    for name, owner in _trio_polls._OWNERS.items():
        assert _trio_polls._matches(name, owner.__dict__[name]), (
            f"trio {trio.__version__} changed {owner.__name__}.{name}: update "
            "kelpie_dst/_trio_polls.py (its _ORIGINALS and copies) to match"
        )


def test_installed_during_a_simulation_and_restored_after() -> None:
    original = EpollIOManager.__dict__["get_events"], WakeupSocketpair.__dict__["drain"]
    with installed_scheduler(RandomStrategy(3)):
        assert EpollIOManager.__dict__["get_events"] is _trio_polls._get_events
        assert WakeupSocketpair.__dict__["drain"] is _trio_polls._drain
    assert (EpollIOManager.__dict__["get_events"], WakeupSocketpair.__dict__["drain"]) == original
    assert not _trio_polls._GATES


def test_a_poll_is_skipped_only_while_no_wakeup_byte_can_be_unread() -> None:
    seen: list[object] = []

    async def main() -> None:
        await trio.sleep(1)
        runner = _RUN.GLOBAL_RUN_CONTEXT.runner
        io = runner.io_manager
        seen.append(id(io) in _trio_polls._GATES)
        seen.append(io.get_events(0))  # nothing written: no system call, no events
        io.force_wakeup()  # a byte on the I/O manager's own socket: the real call finds it
        events = io.get_events(0)
        seen.append([fd for fd, _ in events] == [io._force_wakeup_fd])
        io.process_events(events)  # trio drains it
        seen.append(io.get_events(0))
        await trio.sleep(1)

    assert kelpie_dst.run(main, seed=4).ok
    assert seen == [True, [], True, []]
    assert not _trio_polls._GATES


def test_same_trace_with_and_without_the_skip() -> None:
    async def main() -> None:
        async def ticker(n: int) -> None:
            for _ in range(20):
                await trio.sleep(0.01 * (n + 1))
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            for n in range(4):
                nursery.start_soon(ticker, n)

    with_it = kelpie_dst.run(main, seed=9).trace_hash
    saved = _trio_polls._USABLE[:]
    _trio_polls._USABLE[:] = [False]
    try:
        without = kelpie_dst.run(main, seed=9).trace_hash
    finally:
        _trio_polls._USABLE[:] = saved
    assert with_it == without
