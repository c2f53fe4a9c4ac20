"""Seeded preemption points inside simulated threads.

Two threads that race on plain data (read a shared value, compute, write it back) never block
between the read and the write, so blocking calls alone never interleave them. A trace function
(``sys.settrace``, only in simulated threads) counts the lines executed in the user's own code
(not the standard library, site-packages or kelpie_dst) and, after a seeded number of them,
hands the baton back to the scheduler, which may run another thread or task first.

The distance between preemption points is drawn from a geometric distribution whose mean is
itself drawn per run (4, 16, 64 or 256 lines): some seeds interleave finely, others coarsely,
as swarm testing varies fault rates. Everything comes from the run's ``threads/preempt``
stream, so a seed preempts at the same lines every time. A run has at most ``MAX_POINTS``
preemption points (each costs a switch to the scheduler and back), so a thread that loops for
millions of lines pays the tracing, not millions of switches.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from ._report import is_library

if TYPE_CHECKING:
    from ._core import SimThread

__all__ = ["MAX_POINTS", "MEANS", "Preemption"]

MEANS = (4, 16, 64, 256)  # mean lines between preemption points, one drawn per run
MAX_POINTS = 10_000  # preemption points per run, at most

TraceFunction = Callable[[FrameType, str, Any], Any]


class Preemption:
    """The preemption points of one run."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.mean = rng.choice(MEANS)
        self.countdown = self._draw()
        self.points = 0

    def _draw(self) -> int:
        return 1 + int(-self.mean * math.log(1.0 - self.rng.random()))

    def tracer(self, st: SimThread) -> TraceFunction:
        """The trace function for thread ``st``."""

        def line(frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
            if event == "line":
                self.countdown -= 1
                if self.countdown <= 0:
                    self.points += 1
                    self.countdown = self._draw()
                    st.pause()
                    if self.points >= MAX_POINTS:  # the budget is spent: stop tracing
                        sys.settrace(None)
                        return None
            return line

        def call(frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
            if self.points >= MAX_POINTS:
                sys.settrace(None)
                return None
            return None if is_library(frame.f_code.co_filename) else line

        return call
