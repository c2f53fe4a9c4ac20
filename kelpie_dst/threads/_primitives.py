"""The simulated blocking primitives: the bottom layer that everything else is built on.

The standard library builds ``Condition``, ``Event``, ``Semaphore``, ``Barrier``, ``Timer``,
``queue.Queue`` (and its Lifo and Priority variants), ``concurrent.futures`` futures and
executors on three things: ``_thread.allocate_lock``, ``threading.RLock`` and (for
``queue.SimpleQueue``) a C queue. Replacing those, plus ``time.sleep`` and the thread
start/join, simulates all of it, with the standard library's own semantics (the order in which
``notify`` wakes waiters, a queue's ``task_done``, a barrier's generations) and its own code.

* :class:`SimLock` is a real lock with a list of simulated waiters. Taking a free lock is one C
  call. A participant that finds it taken parks (hands the baton back) until a release wakes it
  or its timeout passes in virtual time. Any other thread (the host's, trio's I/O thread) blocks
  on the real lock, so the object stays correct wherever it is used, during or after a run.
* The factories hand out simulated objects only to participants of a stepping simulation;
  everyone else gets the real ones.
"""

from __future__ import annotations

import collections
import math
import numbers
import queue
import threading
import types
from typing import Any

from .._guard_sites import real_time_caller
from ._core import Loop, Real, SimThread, Wait, current

__all__ = [
    "SimLock",
    "SimpleQueue",
    "park",
    "sim_allocate_lock",
    "sim_rlock",
    "sim_sleep",
    "wake",
]


def park(wait: Wait) -> bool:
    """Block the participant that owns ``wait`` until it is woken (True) or times out."""
    owner = wait.owner
    if isinstance(owner, SimThread):
        return owner.park(wait)
    return owner.runtime.block_loop(wait)


def wake(wait: Wait) -> bool:
    """Wake ``wait``'s owner; False if it was already woken or timed out."""
    if wait.done:
        return False
    runtime = wait.owner.runtime
    if runtime.closed:
        wait.done = True
        return False
    me = current()
    if me is None or me.runtime is not runtime:
        runtime.wake_from_outside(wait)  # another OS thread: the loop applies it
        return True
    wait.done = True
    owner = wait.owner
    if isinstance(owner, SimThread) and owner.wait is wait:
        runtime.make_ready(owner, None)
    return True


class SimLock:
    """``_thread.LockType`` for participants: blocking on it parks in the simulation."""

    __slots__ = ("__weakref__", "_real", "_waits")

    def __init__(self) -> None:
        self._real = Real.lock()
        self._waits: collections.deque[Wait] = collections.deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if timeout != -1:
            if not blocking:
                raise ValueError("can't specify a timeout for a non-blocking call")
            if timeout < 0:
                raise ValueError("timeout value must be positive")
        real = self._real
        if real.acquire(False):
            return True
        if not blocking:
            return False
        me = current()
        if me is None:  # not a participant: block for real
            return bool(real.acquire(True, timeout))
        if timeout == 0:
            return False
        deadline = None if timeout == -1 else me.runtime.sim.now() + timeout
        waits = self._waits
        while True:
            wait = Wait(me, deadline)
            waits.append(wait)
            if real.acquire(False):  # released between our first try and joining the queue
                wait.done = True
                return True
            if not park(wait):
                return False
            if real.acquire(False):
                return True

    def release(self) -> None:
        self._real.release()
        waits = self._waits
        while waits:
            if wake(waits.popleft()):
                break

    def locked(self) -> bool:
        return bool(self._real.locked())

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    acquire_lock = acquire
    release_lock = release
    locked_lock = locked

    def _at_fork_reinit(self) -> None:
        self._real._at_fork_reinit()
        self._waits.clear()

    def __repr__(self) -> str:
        state = "locked" if self.locked() else "unlocked"
        return f"<{state} kelpie_dst.threads.SimLock object at {hex(id(self))}>"


def sim_allocate_lock() -> Any:
    """``_thread.allocate_lock`` (and so ``threading.Lock``)."""
    return Real.lock() if current() is None else SimLock()


def sim_rlock(*args: Any, **kwargs: Any) -> Any:
    """``threading.RLock``: the pure-Python RLock, built on the simulated lock."""
    if current() is None:
        return Real.rlock(*args, **kwargs)
    return threading._PyRLock(*args, **kwargs)  # type: ignore[attr-defined]


class _SimpleQueueType(type):
    """``queue.SimpleQueue`` hands participants the pure-Python one (built on a semaphore);
    ``isinstance`` accepts both."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if current() is None:
            return Real.simple_queue(*args, **kwargs)
        return queue._PySimpleQueue(*args, **kwargs)  # type: ignore[attr-defined]

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, (Real.simple_queue, queue._PySimpleQueue))  # type: ignore[attr-defined]

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, (Real.simple_queue, queue._PySimpleQueue))  # type: ignore[attr-defined]


class SimpleQueue(metaclass=_SimpleQueueType):
    """Stands in for ``queue.SimpleQueue`` while a simulation steps."""

    __class_getitem__: Any = classmethod(types.GenericAlias)


def sim_sleep(secs: Any, /) -> None:
    """``time.sleep``: virtual time for participants (a thread parks, the trio loop blocks
    with only threads running); real time for everyone else and for real-I/O callers."""
    me = current()
    if me is None or real_time_caller(2):
        Real.sleep(secs)
        return
    if not isinstance(secs, numbers.Real):
        raise TypeError(f"'{type(secs).__name__}' object cannot be interpreted as an integer")
    secs = float(secs)
    if math.isnan(secs):
        raise ValueError("Invalid value NaN (not a number)")
    if secs < 0:
        raise ValueError("sleep length must be non-negative")
    if math.isinf(secs):
        raise OverflowError("timestamp out of range for platform time_t")
    if isinstance(me, Loop):
        if secs > 0:
            me.runtime.block_loop(Wait(me, me.runtime.sim.now() + secs))
        return
    if secs == 0:
        me.pause()
        return
    me.park(Wait(me, me.runtime.sim.now() + secs))
