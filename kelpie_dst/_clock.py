"""The virtual clock: trio time that jumps to the next deadline whenever nothing can run.

trio asks a custom :class:`trio.abc.Clock` how long to sleep only when no task is runnable. The
answer here is always zero: if a timer is pending, the clock first jumps to its deadline; if none
is pending and nothing is queued from the host either, the program can never make progress again,
which is a deadlock. Unlike ``MockClock(autojump_threshold=0)``, which spins forever in that
state, this clock reports it to the host loop and lets it stop (see design.md §2, Runner).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import trio

__all__ = ["Interrupt", "VirtualClock"]

_RUN: Any = trio._core._run


class _Host(Protocol):
    active: bool


class Interrupt:
    """Why the clock stopped the host loop."""

    DEADLOCK = "deadlock"
    TIME_LIMIT = "time_limit"
    LIVELOCK = "livelock"


DEFAULT_LIVELOCK_STEPS = 500_000
"""Task steps at one virtual instant before a run fails as a livelock. A normal seed of the
shipped scenarios takes at most a few hundred (timers, latencies and timeouts move time on);
a loop that yields (``sleep(0)``, a retry with no delay, a timer already due) but never waits
keeps trio busy at one instant forever, and the run would hang instead of failing."""


class VirtualClock(trio.abc.Clock):
    """A jumping virtual clock. Time starts at 0 and moves only while trio is idle."""

    def __init__(
        self, time_limit: float = math.inf, livelock_steps: int = DEFAULT_LIVELOCK_STEPS
    ) -> None:
        self._now = 0.0
        self.time_limit = time_limit
        self.interrupt: str | None = None
        self.on_interrupt: Callable[[], None] | None = None
        self.host: _Host | None = None
        self.jumps = 0
        # livelock: task steps run since time last moved (0 turns the check off)
        self.livelock_steps = livelock_steps
        self._instant = 0.0
        self.instant_steps = 0

    # -- trio.abc.Clock --------------------------------------------------------------------
    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        runner = _RUN.GLOBAL_RUN_CONTEXT.runner
        if runner.waiting_for_idle:
            # Let trio wake wait_all_tasks_blocked() first: it replaces this with the cushion.
            return _RUN._MAX_TIMEOUT  # type: ignore[no-any-return]
        if deadline <= self._now:
            return 0.0
        # The host has what it asked for (a step finished): time stays where it is.
        if self.host is not None and not self.host.active:
            return 0.0
        # Work queued from the host (a step to start, a cancellation) runs at the current time,
        # before any jump; trio will pick it up from its wakeup socket on this tick.
        if runner.entry_queue.size():
            return 0.0
        if deadline == math.inf:
            self._stop(Interrupt.DEADLOCK)
            return 0.0
        if deadline > self.time_limit:
            self._now = max(self._now, self.time_limit)
            self._stop(Interrupt.TIME_LIMIT)
            return 0.0
        self._now = deadline
        self.jumps += 1
        return 0.0

    def advance_to(self, when: float) -> None:
        """Jump to ``when`` while the trio loop is blocked in a synchronous call and only
        simulated threads run (their timeouts are the only timers that can fire then)."""
        if when > self._now:
            self._now = when
            self.jumps += 1

    def count_steps(self, steps: int) -> None:
        """Called by the scheduler for each batch of tasks it runs: a run that keeps trio busy
        for :attr:`livelock_steps` task steps without time moving is stopped as a livelock."""
        if self._now != self._instant:
            self._instant = self._now
            self.instant_steps = 0
        self.instant_steps += steps
        if self.instant_steps > self.livelock_steps > 0 and self.interrupt is None:
            self._stop(Interrupt.LIVELOCK)

    # -- host side ---------------------------------------------------------------------------
    def _stop(self, why: str) -> None:
        self.interrupt = why
        if self.on_interrupt is not None:
            self.on_interrupt()

    def clear_interrupt(self) -> None:
        self.interrupt = None
        self.instant_steps = 0  # a fresh budget for the tear-down (cancelled tasks unwinding)
