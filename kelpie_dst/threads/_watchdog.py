"""The real-time watchdog: a simulation never hangs.

Everything a simulation waits for is simulated, so its real clock only stops when some call
blocks outside the model: C code, real I/O, a real lock (one created before the run), a
``time.sleep`` bound before the run. The watchdog finds such a call by sampling the position
(innermost frame and instruction) of whoever holds the baton; if it has not moved for
``threshold`` seconds of real time, the run fails as a liveness violation (exit 2) naming the
thread or task and its file:line.

* A simulated thread that does not hand the baton back is found by the participant waiting for
  it (:meth:`Stall.observe` in ``ThreadRuntime.wait_back``); the thread is abandoned (never run
  again) and the run ends.
* The trio loop itself is watched by one monitor thread per process. When it trips, it
  interrupts the loop: with a signal when the simulation runs on the main thread (a blocking
  system call then fails with EINTR and raises), else with an asynchronous exception. If the
  loop is still stuck after another ``threshold``, the process prints the report and exits 2.

Positions that move (a long computation, a busy loop) are progress, not a hang: the watchdog
only catches calls that are blocked. On Linux it also asks the kernel: a thread that is
runnable (waiting for a core on an overloaded machine) is not blocked, so the clock only runs
while the thread sleeps in the kernel with its position unchanged.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from ._core import Real
from ._report import describe_frame, stack_of, task_frames

__all__ = [
    "DEFAULT_WATCHDOG",
    "HINT",
    "REPLAY_HINT",
    "Stall",
    "Watch",
    "WatchdogInterrupt",
    "format_stack",
    "install_signal_handler",
    "monitor",
    "restore_signal_handler",
]

DEFAULT_WATCHDOG = 5.0  # seconds of real time without progress
SIGNUM = signal.SIGUSR2
REPLAY_HINT: list[str | None] = [None]  # printed if the watchdog has to end the process


class WatchdogInterrupt(BaseException):
    """Raised into the trio loop, or the participant waiting for a thread, when the watchdog
    trips: it unwinds the run, which then fails with the watchdog's report."""


def position(ident: int | None) -> tuple[int, int, int] | None:
    """Where thread ``ident`` is now: its innermost frame, instruction and line."""
    if ident is None:
        return None
    frame = sys._current_frames().get(ident)
    if frame is None:
        return None
    return id(frame), frame.f_lasti, frame.f_lineno


def runnable(native_id: int | None) -> bool:
    """True if the kernel says thread ``native_id`` is running or waiting for a core (Linux's
    ``/proc``); False if it sleeps, or if that cannot be told."""
    if native_id is None:
        return False
    try:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return False
    return bool(fields) and fields[0] == b"R"


class Stall:
    """How long a thread has been blocked: its position unchanged and (where the kernel says)
    not runnable, from successive observations."""

    def __init__(self) -> None:
        self.last: tuple[int, int, int] | None = None
        self.ident: int | None = None
        self.since = 0.0

    def observe(self, ident: int | None, now: float, native_id: int | None = None) -> float:
        where = position(ident)
        moved = where is None or where != self.last or ident != self.ident
        if moved or runnable(native_id):
            self.last, self.ident, self.since = where, ident, now
            return 0.0
        return now - self.since

    def reset(self) -> None:
        self.last = self.ident = None


def format_stack(frames: list[FrameType], limit: int = 12) -> str:
    """What runs (past the thread's or task's machinery), innermost last, one per line."""
    shown = task_frames(frames) or frames[-1:]
    if len(shown) > limit:
        shown = shown[-limit:]
    lines = [f"    {describe_frame(f)}" for f in shown]
    return "\n".join(lines) if lines else "    (no frames)"


HINT = (
    "  The simulation cannot see this call, so it can never return inside the run: C code,\n"
    "  real I/O, or a lock or queue created before the run (only those created inside a run\n"
    "  are simulated). See docs/threads.md, 'The watchdog'."
)


# -- watching the trio loop ----------------------------------------------------------------------
class Watch:
    """One stepping simulation's trio loop, as the monitor sees it."""

    def __init__(
        self,
        ident: int,
        threshold: float,
        busy_elsewhere: Callable[[], bool],
        trip: Callable[[list[FrameType]], str],
        main_thread: bool,
    ) -> None:
        self.ident = ident
        self.native_id = threading.get_native_id()  # made on the loop's own thread
        self.threshold = threshold
        self.busy_elsewhere = busy_elsewhere  # True while a thread holds the baton
        self.trip = trip  # records the failure; returns the report to print on a hard exit
        self.main_thread = main_thread
        self.stall = Stall()
        self.tripped_at: float | None = None
        self.report = ""
        self.async_exc = False  # an asynchronous exception was sent to the loop


class _Monitor:
    """The process's watchdog thread for trio loops (started on first use, daemonic)."""

    def __init__(self) -> None:
        self.watches: dict[int, Watch] = {}
        self.started = False

    def watch(self, watch: Watch) -> None:
        self.watches[watch.ident] = watch
        if not self.started:
            self.started = True
            Real.start_new_thread(self._run, ())

    def forked(self) -> None:
        """In a forked child (a sweep's worker): the parent's thread did not come along."""
        self.watches.clear()
        self.started = False

    def unwatch(self, ident: int) -> None:
        watch = self.watches.pop(ident, None)
        if watch is not None and watch.async_exc:
            # The loop got out of its call some other way: an exception still pending would
            # go off later, anywhere (the next run, the test runner). Withdraw it.
            _set_async_exc(ident, None)

    def _run(self) -> None:  # pragma: no cover (runs on its own thread; tested end to end)
        while True:
            watches = list(self.watches.values())
            interval = min((w.threshold for w in watches), default=2.0) / 10
            Real.sleep(min(0.2, max(0.01, interval)))
            for watch in watches:
                if self.watches.get(watch.ident) is not watch:
                    continue  # its simulation stopped stepping meanwhile
                try:
                    self._check(watch, Real.monotonic())
                except Exception:  # a monitor that dies would let simulations hang
                    continue

    def _check(self, watch: Watch, now: float) -> None:
        if watch.busy_elsewhere():
            watch.stall.reset()
            return
        frozen = watch.stall.observe(watch.ident, now, watch.native_id)
        if watch.tripped_at is None:
            if frozen >= watch.threshold:
                watch.tripped_at = now
                watch.report = watch.trip(stack_of(watch.ident))
                _interrupt(watch)
        elif frozen >= watch.threshold and now - watch.tripped_at >= watch.threshold:
            _hard_exit(watch.report)  # the interrupt did not get it out of the call


def _interrupt(watch: Watch) -> None:
    if watch.main_thread and signal.getsignal(SIGNUM) is _on_signal:
        signal.pthread_kill(watch.ident, SIGNUM)
        return
    watch.async_exc = True
    _set_async_exc(watch.ident, WatchdogInterrupt)


def _set_async_exc(ident: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in thread ``ident`` at its next bytecode (None: withdraw a pending one)."""
    import ctypes  # only when a loop off the main thread must be interrupted

    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async_exc(ctypes.c_ulong(ident), None if exc is None else ctypes.py_object(exc))


def _hard_exit(report: str) -> None:  # pragma: no cover (ends the process; tested end to end)
    lines = [
        f"kelpie-dst: {report}",
        "kelpie-dst: the watchdog could not interrupt the blocked call; exiting with code 2",
    ]
    if REPLAY_HINT[0]:
        lines.append(f"replay: {REPLAY_HINT[0]}")
    os.write(2, ("\n".join(lines) + "\n").encode(errors="replace"))
    os._exit(2)


def _on_signal(signum: int, frame: Any) -> None:
    raise WatchdogInterrupt("the watchdog interrupted a blocked call")


def install_signal_handler() -> Any:
    """On the main thread, route the watchdog's signal to :class:`WatchdogInterrupt` (unless
    the program handles that signal itself). Returns what to restore, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        previous = signal.getsignal(SIGNUM)
        if previous not in (signal.SIG_DFL, None):
            return None
        signal.signal(SIGNUM, _on_signal)
    except ValueError:  # not the main interpreter
        return None
    return previous


def restore_signal_handler(previous: Any) -> None:
    if previous is not None:
        signal.signal(SIGNUM, previous)


monitor = _Monitor()
os.register_at_fork(after_in_child=monitor.forked)
