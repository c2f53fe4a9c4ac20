"""Starting, running and joining simulated threads, and trio.to_thread's workers.

``Thread.start()`` in a simulation starts a real OS thread that waits for the baton, then runs
the standard library's own ``Thread._bootstrap`` under it: ``ident``, ``native_id``,
``is_alive()``, ``threading.enumerate()``, ``excepthook`` and ``threading.settrace`` behave as
usual. ``start()`` returns once the thread is set up, as it does for real; its body runs when
the scheduler first picks it.

``trio.to_thread.run_sync`` runs the function on a worker (a daemonic thread reused between
calls on the same node, like trio's thread cache), hosted by the calling task, so
``trio.from_thread.run`` re-enters that task as trio does.
"""

from __future__ import annotations

import _thread
import contextvars
import functools
import inspect
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import outcome
import trio
from sniffio import current_async_library_cvar

from .._nodes import NODE
from ._core import KEY, Loop, Real, SimThread, State, ThreadKilled, Wait, current
from ._primitives import park

if TYPE_CHECKING:
    from ._runtime import ThreadRuntime

__all__ = ["join_thread", "start_thread", "to_thread"]


def start_thread(runtime: ThreadRuntime, thread: threading.Thread, starter: Any) -> None:
    """``thread.start()`` by participant ``starter``."""
    if not thread._initialized:  # type: ignore[attr-defined]
        raise RuntimeError("thread.__init__() not called")
    if thread._started.is_set():  # type: ignore[attr-defined]
        raise RuntimeError("threads can only be started once")
    node = starter.node if isinstance(starter, SimThread) else NODE.get(None)
    st = _launch(runtime, thread, node, "thread", _run_body)
    runtime.trace("thread.start", thread=st.name, daemon=thread.daemon)
    if isinstance(starter, Loop):
        runtime.spawn_host(st)
    else:
        runtime.spawns.append(st)


def _launch(
    runtime: ThreadRuntime,
    thread: threading.Thread,
    node: Any,
    kind: str,
    body: Callable[[SimThread, Callable[[], None]], None],
) -> SimThread:
    """Start ``thread``'s OS thread and run its start-up; it stops before its body."""
    st = SimThread(runtime, thread, node, kind, runtime.next_seq())
    st.context = contextvars.Context()
    if node is not None:
        st.context.run(NODE.set, node)
    original_run = thread.run
    thread.__dict__["run"] = lambda: body(st, original_run)
    thread.__dict__[KEY] = st
    with threading._active_limbo_lock:  # type: ignore[attr-defined]
        threading._limbo[thread] = thread  # type: ignore[attr-defined]
    try:
        _start_os_thread(st)
    except BaseException:
        with threading._active_limbo_lock:  # type: ignore[attr-defined]
            del threading._limbo[thread]  # type: ignore[attr-defined]
        raise
    runtime.threads.append(st)
    st.value = None
    runtime.run_thread(st)
    return st


def _start_os_thread(st: SimThread) -> None:
    start_joinable = getattr(_thread, "start_joinable_thread", None)
    if start_joinable is not None:  # Python 3.13+: the handle joins it; daemonic in C, so an
        # abandoned thread never holds up the interpreter's exit
        start_joinable(lambda: _entry(st), handle=st.thread._handle, daemon=True)  # type: ignore[attr-defined]
    else:
        Real.start_new_thread(_entry, (st,))


def _entry(st: SimThread) -> None:
    """The OS thread: wait for the baton, then run the standard library's bootstrap under it."""
    from ._core import PARTICIPANTS

    st.go.acquire()
    st.ident = Real.get_ident()
    PARTICIPANTS[st.ident] = st
    context = st.context
    try:
        context.run(st.thread._bootstrap)  # type: ignore[attr-defined]
    finally:
        PARTICIPANTS.pop(st.ident, None)
        st.context = context = None
        st.state = State.DONE
        if not st.abandoned:
            st.back.release()


def _run_body(st: SimThread, run: Callable[[], None]) -> None:
    """``thread.run`` while simulated: wait to be scheduled, then run under preemption."""
    st.thread.__dict__.pop("run", None)
    try:
        st.switch_out(State.READY)  # started: the scheduler decides when the body runs
        _traced(st, run)
    except ThreadKilled:
        pass


def _traced(st: SimThread, fn: Callable[[], Any]) -> Any:
    preemption = st.runtime.preemption
    if preemption is None or sys.gettrace() is not None:  # a debugger or coverage owns tracing
        return fn()
    sys.settrace(preemption.tracer(st))
    try:
        return fn()
    finally:
        sys.settrace(None)


def join_thread(thread: threading.Thread, timeout: float | None) -> bool:
    """``thread.join(timeout)`` by a participant, for a simulated thread. False if this is not
    a simulated thread of the running simulation (the caller joins it for real)."""
    me = current()
    st = thread.__dict__.get(KEY)
    if me is None or not isinstance(st, SimThread) or st.runtime is not me.runtime:
        return False
    if not thread._started.is_set():  # type: ignore[attr-defined]
        raise RuntimeError("cannot join thread before it is started")
    if thread is threading.current_thread():
        raise RuntimeError("cannot join current thread")
    deadline = None if timeout is None else me.runtime.sim.now() + max(timeout, 0.0)
    while not st.finished and not st.abandoned:
        if deadline is not None and deadline <= me.runtime.sim.now():
            return True
        wait = Wait(me, deadline)
        st.joiners.append(wait)
        if not park(wait):
            return True
    if st.finished:
        Real.thread_join(thread, 0)  # the OS thread has ended: tidy threading's state
    return True


# -- trio.to_thread ---------------------------------------------------------------------------
@attrs.frozen(eq=False)
class _Borrower:
    """Holds a CapacityLimiter token on behalf of a worker (as trio's ThreadPlaceholder)."""

    name: str


class _Worker(threading.Thread):
    """A to_thread worker: runs one job after another."""


async def to_thread(
    runtime: ThreadRuntime,
    sync_fn: Callable[..., Any],
    args: tuple[Any, ...],
    thread_name: str | None,
    abandon_on_cancel: bool,
    limiter: Any,
) -> Any:
    await trio.lowlevel.checkpoint_if_cancelled()
    abandon = bool(abandon_on_cancel)
    if limiter is None:
        limiter = trio.to_thread.current_default_thread_limiter()
    if thread_name is None:
        task = trio.lowlevel.current_task()
        thread_name = f"{getattr(sync_fn, '__name__', None)} from {task.name}"
    borrower = _Borrower(thread_name)
    try:
        limiter.acquire_on_behalf_of_nowait(borrower)
    except trio.WouldBlock:
        await limiter.acquire_on_behalf_of(borrower)
    node = NODE.get(None)
    try:
        st = _worker(runtime, node)
    except BaseException:
        limiter.release_on_behalf_of(borrower)
        raise
    context = contextvars.copy_context()
    context.run(current_async_library_cvar.set, None)
    st.job = (context, sync_fn, args, thread_name)
    st.abandon_on_cancel = abandon
    st.cancel_register = [None]
    st.release = lambda: limiter.release_on_behalf_of(borrower)
    st.state, st.value = State.READY, None
    try:
        await runtime.serve(st)
    except BaseException:
        if not st.adopted:
            limiter.release_on_behalf_of(borrower)
            runtime.return_worker(st)
        raise
    result = st.result
    st.result = st.release = None
    limiter.release_on_behalf_of(borrower)
    runtime.return_worker(st)
    if st.killed:  # its node crashed or the run ends: this task is cancelled too
        await trio.lowlevel.checkpoint()
        raise trio.RunFinishedError("the simulation ended this trio.to_thread call")
    await trio.lowlevel.cancel_shielded_checkpoint()
    assert result is not None
    return result.unwrap()


def _worker(runtime: ThreadRuntime, node: Any) -> SimThread:
    idle = runtime.idle.get(node)
    if idle:
        return idle.pop()
    thread = _Worker(name=f"kelpie_dst worker {runtime.next_seq()}", daemon=True)
    st = _launch(runtime, thread, node, "worker", _worker_body)
    runtime.trace("thread.start", thread=st.name, daemon=True)
    return st


def _worker_body(st: SimThread, run: Callable[[], None]) -> None:
    st.thread.__dict__.pop("run", None)
    try:
        st.switch_out(State.IDLE)
        while st.job is not None:
            context, fn, args, name = st.job
            st.thread.name = name
            job = functools.partial(context.run, _call_sync, fn, args)
            st.result = outcome.capture(_traced, st, job)
            st.job = None
            if st.killed:
                return
            st.switch_out(State.IDLE)
    except ThreadKilled:
        pass


def _call_sync(fn: Callable[..., Any], args: tuple[Any, ...], what: str = "a sync") -> Any:
    """``fn(*args)``, refusing an async function with trio's message."""
    result = fn(*args)
    if inspect.iscoroutine(result):
        result.close()
        raise TypeError(
            f"Trio expected {what} function, but {getattr(fn, '__qualname__', fn)!r} appears "
            "to be asynchronous"
        )
    return result


# -- trio.from_thread -----------------------------------------------------------------------------
def from_thread(
    me: SimThread, fn: Callable[..., Any], args: tuple[Any, ...], token: Any, is_async: bool
) -> Any:
    """``trio.from_thread.run``/``run_sync`` from simulated thread ``me``: its host task runs
    ``fn`` on the trio loop (the to_thread caller, as trio does) while ``me`` waits."""
    if token is None and me.kind != "worker":
        raise RuntimeError("this thread wasn't created by Trio, pass kwarg trio_token=...")
    context = contextvars.copy_context()
    if is_async:

        async def call() -> Any:
            task = trio.lowlevel.current_task()
            old = task.context
            task.context = context.copy()
            await trio.lowlevel.cancel_shielded_checkpoint()
            result = await outcome.acapture(_await, fn, args)
            task.context = old
            await trio.lowlevel.cancel_shielded_checkpoint()
            return result.unwrap()

    else:

        async def call() -> Any:
            return context.run(_call_sync, fn, args, "a synchronous")

    return me.call_in_trio(call)


async def _await(fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> Any:
    coro = fn(*args)
    if not inspect.isawaitable(coro):
        raise TypeError(
            f"Trio was expecting an async function, but instead it got {coro!r} - did you "
            f"accidentally pass a sync function to trio.from_thread.run?"
        )
    return await coro
