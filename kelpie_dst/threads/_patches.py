"""What the guards swap while a simulation steps, for threads (see ``_guards``).

Each replacement serves the simulated behaviour to participants of the stepping simulation
(the trio loop and the simulated threads) and the original to every other thread, so a
reference that outlives the run is harmless.
"""

from __future__ import annotations

import _thread
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import trio

from .._guard_sites import call_site
from ._core import PARTICIPANTS, Loop, Real, SimThread, current
from ._primitives import SimpleQueue, sim_allocate_lock, sim_rlock, sim_sleep
from ._start import from_thread, join_thread, start_thread, to_thread

__all__ = ["CLASS_PATCHES", "MODULES", "PATCHES"]


class _Trio:
    """trio's originals (a class attribute is never swapped by the identity scan)."""

    to_thread: Callable[..., Any] = trio.to_thread.run_sync
    from_thread_run: Callable[..., Any] = trio.from_thread.run
    from_thread_run_sync: Callable[..., Any] = trio.from_thread.run_sync
    check_cancelled: Callable[[], None] = trio.from_thread.check_cancelled


@contextlib.contextmanager
def outsider() -> Iterator[None]:
    """Treat this OS thread as outside the simulation for a moment (real primitives)."""
    ident = Real.get_ident()
    me = PARTICIPANTS.pop(ident, None)
    try:
        yield
    finally:
        if me is not None:
            PARTICIPANTS[ident] = me


def sim_thread_start(self: threading.Thread) -> None:
    me = current()
    if me is None:
        Real.thread_start(self)
    elif sys._getframe(1).f_globals.get("__name__") == "trio._core._thread_cache":
        with outsider():  # trio's own I/O worker (guest mode): a real thread
            Real.thread_start(self)
    else:
        start_thread(me.runtime, self, me)


def sim_start_new_thread(function: Any, args: Any, kwargs: Any = None, /) -> int:
    """``_thread.start_new_thread``, below ``threading``: under ``strict`` a violation (use
    ``threading.Thread``); otherwise reported and run as a simulated daemon thread."""
    me = current()
    if me is None:
        return Real.start_new_thread(function, args, *(() if kwargs is None else (kwargs,)))
    me.runtime.sim.guards.hit("_thread.start_new_thread", call_site(2))
    thread = threading.Thread(target=function, args=args, kwargs=kwargs or {}, daemon=True)
    start_thread(me.runtime, thread, me)
    assert thread.ident is not None
    return thread.ident


def sim_thread_join(self: threading.Thread, timeout: float | None = None) -> None:
    if not join_thread(self, timeout):
        Real.thread_join(self, timeout)


async def sim_to_thread(
    sync_fn: Callable[..., Any],
    *args: Any,
    thread_name: str | None = None,
    abandon_on_cancel: bool = False,
    limiter: Any = None,
    cancellable: bool | None = None,
) -> Any:
    me = current()
    if cancellable is not None:
        abandon_on_cancel = cancellable
    if not isinstance(me, Loop):
        return await _Trio.to_thread(
            sync_fn,
            *args,
            thread_name=thread_name,
            abandon_on_cancel=abandon_on_cancel,
            limiter=limiter,
        )
    return await to_thread(me.runtime, sync_fn, args, thread_name, abandon_on_cancel, limiter)


def _ours(trio_token: Any) -> SimThread | None:
    me = current()
    if isinstance(me, SimThread) and (trio_token is None or trio_token is me.runtime.sim._token):
        return me
    return None


def sim_from_thread_run(afn: Callable[..., Any], *args: Any, trio_token: Any = None) -> Any:
    me = _ours(trio_token)
    if me is None:
        return _Trio.from_thread_run(afn, *args, trio_token=trio_token)
    return from_thread(me, afn, args, trio_token, is_async=True)


def sim_from_thread_run_sync(fn: Callable[..., Any], *args: Any, trio_token: Any = None) -> Any:
    me = _ours(trio_token)
    if me is None:
        return _Trio.from_thread_run_sync(fn, *args, trio_token=trio_token)
    return from_thread(me, fn, args, trio_token, is_async=False)


def sim_check_cancelled() -> None:
    me = current()
    if not isinstance(me, SimThread):
        _Trio.check_cancelled()
        return
    if me.kind != "worker":
        raise RuntimeError("this thread wasn't created by Trio, can't check for cancellation")
    raise_cancel = me.cancel_register[0]
    if raise_cancel is not None:
        raise_cancel()


# original -> replacement, wherever a module attribute *is* the original
PATCHES: list[tuple[object, object]] = [
    (Real.lock, sim_allocate_lock),
    (_thread.allocate, sim_allocate_lock),
    (Real.rlock, sim_rlock),
    (Real.simple_queue, SimpleQueue),
    (Real.sleep, sim_sleep),
    (Real.start_new_thread, sim_start_new_thread),
    (_Trio.to_thread, sim_to_thread),
    (_Trio.from_thread_run, sim_from_thread_run),
    (_Trio.from_thread_run_sync, sim_from_thread_run_sync),
    (_Trio.check_cancelled, sim_check_cancelled),
]
# class attributes patched directly
CLASS_PATCHES: list[tuple[type, str, object, object]] = [
    (threading.Thread, "start", Real.thread_start, sim_thread_start),
    (threading.Thread, "join", Real.thread_join, sim_thread_join),
]
# kelpie_dst's own modules that keep originals for themselves: never swapped
MODULES = frozenset(
    f"kelpie_dst.threads.{name}"
    for name in (
        "_core",
        "_exit",
        "_failures",
        "_hashing",
        "_loop",
        "_patches",
        "_preempt",
        "_primitives",
        "_report",
        "_runtime",
        "_start",
        "_timers",
        "_watchdog",
    )
)
