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


class VirtualClock(trio.abc.Clock):
    """A jumping virtual clock. Time starts at 0 and moves only while trio is idle."""

    def __init__(self, time_limit: float = math.inf) -> None:
        self._now = 0.0
        self.time_limit = time_limit
        self.interrupt: str | None = None
        self.on_interrupt: Callable[[], None] | None = None
        self.host: _Host | None = None
        self.jumps = 0

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

    # -- host side ---------------------------------------------------------------------------
    def _stop(self, why: str) -> None:
        self.interrupt = why
        if self.on_interrupt is not None:
            self.on_interrupt()

    def clear_interrupt(self) -> None:
        self.interrupt = None
