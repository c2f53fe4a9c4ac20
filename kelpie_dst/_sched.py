"""Scheduling strategies: deterministic replacements for trio's private scheduler RNG.

With ``_ALLOW_DETERMINISTIC_SCHEDULING`` set, trio sorts each batch of runnable tasks by creation
order and then calls ``_r.shuffle(batch)``; tasks run from the *end* of the list. Installing an
object of our own as ``_r`` therefore decides the order of every batch:

* :class:`RandomStrategy` shuffles uniformly from a seeded stream (what trio does under
  Hypothesis, but with a seed per run instead of 0 for every run).
* :class:`PCTStrategy` is a PCT-style priority scheduler (Burckhardt et al., 2010): every task
  gets a random priority when first seen, batches run in priority order, and at ``depth - 1``
  random change points the running task drops below all others. Bugs that need one task to win
  consistently are found far more often than under a uniform shuffle. The change points are
  spread over the program's estimated length (``_pct.py``), so they land inside short programs.

Both also hold back the tasks of paused nodes, which is how :meth:`Simulation.pause` freezes a
node exactly (its tasks stay scheduled but do not run until it resumes), and both record every
decision for the trace: the number of each task in the order it runs (:attr:`ran`), and, through
:func:`trace_timers`, every timer armed.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import random
from collections.abc import Iterator, MutableSequence
from typing import TYPE_CHECKING, Any

import trio

from ._errors import DstError
from ._trio_polls import quiet_polls
from ._trio_speed import fast_deadlines

if TYPE_CHECKING:
    from ._clock import VirtualClock
    from ._nodes import Node

__all__ = [
    "MAX_HORIZON",
    "STRATEGIES",
    "PCTStrategy",
    "RandomStrategy",
    "installed_scheduler",
    "trace_timers",
]

MAX_HORIZON = 1 << 16  # task steps: where PCT's scale-free change points stop

_RUN_MODULE: Any = trio._core._run
_REQUIRED = ("_r", "_ALLOW_DETERMINISTIC_SCHEDULING", "GLOBAL_RUN_CONTEXT", "Deadlines")


def check_trio_internals() -> None:
    """Fail loudly if this trio release no longer has the private hooks the simulator needs."""
    missing = [name for name in _REQUIRED if not hasattr(_RUN_MODULE, name)]
    if missing:
        raise DstError(
            f"trio {trio.__version__} lacks {', '.join(missing)} in trio._core._run; "
            "kelpie_dst needs them for deterministic scheduling (pin trio to a tested range)"
        )


class RandomStrategy(random.Random):
    """Uniformly random order for each batch, from a seeded stream."""

    name = "random"

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.steps = 0
        self._parked: dict[Node, list[trio.lowlevel.Task]] = {}
        self.pausing = False
        # Task numbers in spawn order (stable across processes, unlike trio's _counter), and
        # the trace's list that receives them as tasks run (None: not traced).
        self.numbers: dict[trio.lowlevel.Task, int] = {}
        self._next_number = 0
        self.ran: list[int] | None = None
        self.clock: VirtualClock | None = None  # told each batch's size (livelock check)

    def shuffle(self, x: MutableSequence[Any]) -> None:
        if self.pausing:
            self._park(x)
        self.steps += len(x)
        if self.clock is not None:
            self.clock.count_steps(len(x))
        self._order(x)
        if self.ran is not None:
            # trio pops tasks from the end of the batch: the last one runs first.
            self.ran.extend(map(self.numbers.__getitem__, reversed(x)))

    def register(self, task: trio.lowlevel.Task) -> int:
        """Number a new task (called when it is spawned); the number is traced."""
        number = self.numbers[task] = self._next_number
        self._next_number += 1
        return number

    def _order(self, batch: MutableSequence[Any]) -> None:
        # Fisher-Yates with the C-level random() (batches are small, so the float's bias is
        # negligible); about twice as fast as random.shuffle's _randbelow loop.
        rnd = self.random
        for i in range(len(batch) - 1, 0, -1):
            j = int(rnd() * (i + 1))
            batch[i], batch[j] = batch[j], batch[i]

    def forget(self, task: trio.lowlevel.Task) -> None:
        """Called when a task exits."""
        self.numbers.pop(task, None)

    # -- pausing -----------------------------------------------------------------------------
    def _park(self, batch: MutableSequence[Any]) -> None:
        from ._nodes import NODE

        keep = []
        for task in batch:
            node = task.context.get(NODE, None)
            if node is not None and node.paused:
                self._parked.setdefault(node, []).append(task)
            else:
                keep.append(task)
        batch[:] = keep

    def release(self, node: Node) -> None:
        """Put the tasks held back for ``node`` back on trio's run queue."""
        tasks = self._parked.pop(node, [])
        if not tasks:
            return
        runner = _RUN_MODULE.GLOBAL_RUN_CONTEXT.runner
        if not runner.runq and runner.is_guest:
            runner.force_guest_tick_asap()
        runner.runq.extend(tasks)


class PCTStrategy(RandomStrategy):
    """Random task priorities with ``depth - 1`` change points over the program's length.

    With ``horizon`` (an estimate of the program's length in task steps, from a calibration
    run: see :func:`kelpie_dst._pct.horizon_for`), the change points are uniform in
    ``[1, horizon]``, as in Burckhardt et al.: a bug of depth ``d`` in a program of at most
    ``horizon`` steps with ``k`` tasks is found with probability at least
    ``1 / (k * horizon**(d - 1))`` per seed. Without an estimate they are drawn log-uniformly
    over ``[1, MAX_HORIZON]`` (scale-free: each doubling of the length gets the same share), so
    that they land inside short programs as well as long ones.
    """

    name = "pct"

    def __init__(self, seed: int, *, depth: int = 3, horizon: int | None = None) -> None:
        super().__init__(seed)
        self.depth = depth
        self.horizon = horizon
        self._priority: dict[trio.lowlevel.Task, float] = {}
        count = max(0, depth - 1)
        if horizon is not None:
            points = [self.randint(1, max(1, horizon)) for _ in range(count)]
        else:
            log_max = math.log(MAX_HORIZON)
            points = [int(math.exp(self.random() * log_max)) for _ in range(count)]
        self._change_points = sorted(points)
        self._changes = 0

    def _order(self, batch: MutableSequence[Any]) -> None:
        priority = self._priority
        for task in batch:
            if task not in priority:
                # Initial priorities sit above every priority a change point can assign.
                priority[task] = self.depth + self.random()
        batch_list = sorted(batch, key=priority.__getitem__)
        batch[:] = batch_list
        points = self._change_points
        if batch_list and self._changes < len(points) and self.steps >= points[self._changes]:
            self._changes += 1
            top = batch_list[-1]
            priority[top] = self.depth - self._changes + self.random() * 0.5

    def forget(self, task: trio.lowlevel.Task) -> None:
        super().forget(task)
        self._priority.pop(task, None)


class _TracedDeadlines(_RUN_MODULE.Deadlines):  # type: ignore[misc]
    """trio's table of deadlines, also recording every deadline armed (in virtual seconds)."""

    __slots__ = ("timers",)

    def add(self, deadline: float, cancel_scope: Any) -> None:
        # Deadlines.add, inlined (one Python call per timer instead of two)
        self.timers.append(deadline)
        heapq.heappush(self._heap, (deadline, id(cancel_scope), cancel_scope))
        self._active += 1


def trace_timers(runner: Any, timers: list[float]) -> None:
    """Make ``runner`` (trio's, just created) append every timer it arms to ``timers``."""
    traced = object.__new__(_TracedDeadlines)
    traced._heap = runner.deadlines._heap
    traced._active = runner.deadlines._active
    traced.timers = timers
    runner.deadlines = traced


STRATEGIES: dict[str, type[RandomStrategy]] = {"random": RandomStrategy, "pct": PCTStrategy}


@contextlib.contextmanager
def installed_scheduler(strategy: RandomStrategy) -> Iterator[None]:
    """Install ``strategy`` as trio's scheduler RNG with deterministic mode on; restore after."""
    check_trio_internals()
    saved_r = _RUN_MODULE._r
    saved_allow = _RUN_MODULE._ALLOW_DETERMINISTIC_SCHEDULING
    _RUN_MODULE._r = strategy
    _RUN_MODULE._ALLOW_DETERMINISTIC_SCHEDULING = True
    try:
        with fast_deadlines(), quiet_polls():
            yield
    finally:
        _RUN_MODULE._r = saved_r
        _RUN_MODULE._ALLOW_DETERMINISTIC_SCHEDULING = saved_allow
