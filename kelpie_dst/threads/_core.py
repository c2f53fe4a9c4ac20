"""The baton: which real OS thread may act in the simulation, and how it hands over.

A simulated thread is a real OS thread that runs only while it holds the baton. Exactly one
participant of a simulation runs at a time: the trio loop (the thread that steps the
simulation) or one simulated thread. A participant hands the baton over with a pair of real
locks (``go`` and ``back``), so a switch costs two OS context switches and nothing else.

This module holds what every other part needs: the originals of the functions the simulation
replaces (kept in a class, where the guards' identity scan never looks), the table of
participants, :class:`Wait` records, and :class:`SimThread`'s thread-side half.
"""

from __future__ import annotations

import _queue
import _thread
import enum
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import outcome

if TYPE_CHECKING:
    from ._runtime import ThreadRuntime

__all__ = [
    "KEY",
    "KILL_PATIENCE",
    "PARTICIPANTS",
    "Loop",
    "Real",
    "SimThread",
    "State",
    "ThreadKilled",
    "Wait",
    "current",
]


class Real:
    """The originals, captured at import. A class attribute is never swapped by the guards'
    identity scan of module namespaces, so kelpie_dst's own machinery uses these."""

    lock: Callable[[], Any] = _thread.allocate_lock
    rlock: Callable[..., Any] = threading.RLock
    simple_queue: type = _queue.SimpleQueue
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    get_ident: Callable[[], int] = _thread.get_ident
    start_new_thread: Callable[..., int] = _thread.start_new_thread
    thread_start: Callable[[threading.Thread], None] = threading.Thread.start
    thread_join: Callable[..., None] = threading.Thread.join


KILL_PATIENCE = 100  # kills a thread may swallow before it is abandoned


class ThreadKilled(BaseException):
    """Raised inside a simulated thread that the simulation ends: its node crashed or stopped,
    or the run is over. It unwinds the thread like a cancellation; a killed process raises
    nothing, so nothing reports it."""


class State(enum.Enum):
    NEW = "new"  # created; its OS thread has not run its start-up yet
    READY = "ready"  # may run as soon as the scheduler picks it
    RUNNING = "running"  # holds the baton
    PARKED = "parked"  # blocked on a simulated primitive (a Wait)
    YIELDED = "yielded"  # stopped at a preemption point or time.sleep(0)
    CALL = "call"  # waits for the trio loop to run something (trio.from_thread)
    IDLE = "idle"  # a to_thread worker between jobs
    DONE = "done"  # finished (or killed, or abandoned by the watchdog)


class Loop:
    """The trio loop as a participant: the thread that steps the simulation."""

    name = "the trio loop"

    def __init__(self, runtime: ThreadRuntime) -> None:
        self.runtime = runtime


KEY = "_kelpie_dst_thread"  # a simulated Thread's SimThread, in the Thread's __dict__
# ident -> participant, for the simulation that is stepping now (at most one per process)
PARTICIPANTS: dict[int, SimThread | Loop] = {}
_get_ident = Real.get_ident


def current() -> SimThread | Loop | None:
    """The participant running on this OS thread, or ``None`` for any other thread."""
    return PARTICIPANTS.get(_get_ident())


class Wait:
    """One participant blocked on one thing (a lock, a join, a sleep), until woken or timed
    out. The first of the two wins; the other finds ``done`` set and does nothing."""

    __slots__ = ("deadline", "done", "owner", "timed_out")

    def __init__(self, owner: SimThread | Loop, deadline: float | None) -> None:
        self.owner = owner
        self.deadline = deadline
        self.done = False
        self.timed_out = False

    def __lt__(self, other: Wait) -> bool:  # for the timer heap, after (deadline, seq)
        return False


class SimThread:
    """One simulated thread. The runtime (``_runtime``) drives it from the trio side; the
    methods here run on the thread itself, while it holds the baton."""

    def __init__(
        self,
        runtime: ThreadRuntime,
        thread: threading.Thread,
        node: Any,
        kind: str,
        seq: int,
    ) -> None:
        self.runtime = runtime
        self.thread = thread
        self.node = node  # the simulated node it runs on (None for the simulator's own)
        self.kind = kind  # "thread" (threading.Thread) or "worker" (trio.to_thread's)
        self.seq = seq  # creation order: the tie-break wherever threads are listed
        self.state = State.NEW
        self.ident: int | None = None
        self.go = Real.lock()
        self.go.acquire()
        self.back = Real.lock()
        self.back.acquire()
        self.value: outcome.Outcome[Any] | None = None  # delivered when it next runs
        self.wait: Wait | None = None
        self.call: Callable[[], Any] | None = None  # what CALL asks the trio loop to await
        self.host: Any = None  # the trio task that runs it (a trio.lowlevel.Task)
        self.host_waiting = False
        self.killed = False
        self.abandoned = False
        self.abandon_on_cancel = False
        self.cancel_register: list[Any] = [None]  # for trio.from_thread.check_cancelled
        self.joiners: list[Wait] = []
        self.job: tuple[Any, ...] | None = None  # a worker's current trio.to_thread call
        self.result: outcome.Outcome[Any] | None = None
        self.context: Any = None  # the contextvars.Context it starts in
        self.finished = False  # its OS thread has ended and joiners were woken
        self.adopted = False  # an abandoned to_thread call: a background task hosts it
        self.release: Callable[[], None] | None = None  # frees its to_thread limiter token
        self.tracer: Callable[..., Any] | None = None  # the preemption trace function
        self.refusals = 0  # blocking calls refused since it was killed

    @property
    def name(self) -> str:
        return self.thread.name

    def __repr__(self) -> str:
        return f"<SimThread {self.name!r} {self.state.value}>"

    # -- the thread's side ---------------------------------------------------------------------
    def switch_out(self, state: State) -> Any:
        """Give the baton back in ``state`` and wait until the scheduler runs this thread again;
        return what it was resumed with (or raise it, e.g. :class:`ThreadKilled`)."""
        self.state = state
        self.back.release()
        self.go.acquire()
        if self.abandoned:
            _never_return()
        value, self.value = self.value, None
        return value.unwrap() if value is not None else None

    def park(self, wait: Wait) -> bool:
        """Block on ``wait``: True when woken, False when it timed out."""
        if self.killed:
            self.refuse()
        self.wait = wait
        if wait.deadline is not None:
            self.runtime.timers.add(wait)
        self.switch_out(State.PARKED)
        return not wait.timed_out

    def pause(self) -> None:
        """A scheduling point: let the scheduler run someone else first (or not)."""
        if not self.killed:
            self.switch_out(State.YIELDED)

    def refuse(self) -> None:
        """A killed thread tried to block: raise :class:`ThreadKilled` again. One that keeps
        swallowing it (``except BaseException`` in a loop) hands the baton back now and then,
        and the runtime gives up on it (see ``ThreadRuntime.serve``)."""
        self.refusals += 1
        if self.refusals % KILL_PATIENCE == 0:
            self.switch_out(State.YIELDED)
        raise ThreadKilled

    def call_in_trio(self, call: Callable[[], Any]) -> Any:
        """Have this thread's host task ``await call()`` on the trio loop; return its outcome."""
        if self.killed:
            self.refuse()
        self.call = call
        result: outcome.Outcome[Any] = self.switch_out(State.CALL)
        return result.unwrap()


def _never_return() -> None:
    """Where an abandoned thread ends up if its blocking call ever returns: the run gave up
    on it, so it must never touch the simulation again."""
    forever = Real.lock()
    forever.acquire()
    forever.acquire()
    sys.exit()  # pragma: no cover (unreachable)
