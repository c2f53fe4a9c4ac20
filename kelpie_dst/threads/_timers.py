"""Timeouts of simulated threads: ``join(5)``, ``queue.get(timeout=1)``, ``time.sleep(2)``.

Every timed wait goes on one heap. A timekeeper task (spawned the first time a thread waits
with a timeout) sleeps until the earliest deadline and expires what is due; while the trio
loop is blocked, ``_loop.block_loop`` expires them itself. Timeouts are not cancel scopes
around the host's wait: once a non-abandonable ``to_thread`` caller has been cancelled, trio
would never deliver a later deadline of the same task.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

import trio

from ._core import SimThread, Wait

if TYPE_CHECKING:
    from ._runtime import ThreadRuntime

__all__ = ["Timers"]


class Timers:
    """The deadlines of one simulation's threads (and of the trio loop while blocked)."""

    def __init__(self, runtime: ThreadRuntime) -> None:
        self.runtime = runtime
        self.changed = False  # a deadline was added: the timekeeper must look
        self._heap: list[tuple[float, int, Wait]] = []
        self._keeper = False
        self._scope: trio.CancelScope | None = None

    def add(self, wait: Wait) -> None:
        assert wait.deadline is not None
        heapq.heappush(self._heap, (wait.deadline, self.runtime.next_seq(), wait))
        self.changed = True

    def next_deadline(self) -> float:
        heap = self._heap
        while heap and heap[0][2].done:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def expire_due(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            wait = heapq.heappop(heap)[2]
            if wait.done:
                continue
            wait.done = wait.timed_out = True
            owner = wait.owner
            if isinstance(owner, SimThread) and owner.wait is wait:
                self.runtime.make_ready(owner, None)

    def arm(self) -> None:
        """On the trio loop: make the timekeeper wake for the earliest deadline."""
        self.changed = False
        first = self.next_deadline()
        if first == math.inf:
            return
        if not self._keeper:
            self._keeper = True
            self.runtime.sim._spawn(self._timekeeper, name="kelpie_dst.threads.timekeeper")
        elif self._scope is not None and first < self._scope.deadline:
            self._scope.deadline = first

    async def _timekeeper(self) -> None:
        while True:
            self.expire_due(trio.current_time())
            self.runtime.flush()
            with trio.CancelScope(deadline=self.next_deadline()) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
