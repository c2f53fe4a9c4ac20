"""When simulated threads fail the run: the watchdog's reports, abandoned threads, and where
each live thread waits (for deadlock reports)."""

from __future__ import annotations

import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from ._core import PARTICIPANTS, State
from ._report import describe_frame, site_key, stack_of, user_frame
from ._watchdog import HINT, WatchdogInterrupt, format_stack

if TYPE_CHECKING:
    from ._core import SimThread
    from ._runtime import ThreadRuntime

__all__ = ["abandon", "loop_stuck", "thread_stuck", "threads_report"]


def thread_stuck(runtime: ThreadRuntime, holder: SimThread, resumed: SimThread) -> None:
    """The watchdog tripped on ``holder`` (run, perhaps through ``resumed``, by this
    participant): record the failure, give up on both, unwind the run."""
    frames = stack_of(holder.ident)
    frame = user_frame(frames)
    message = (
        f"watchdog: thread {holder.name!r} made no progress for {runtime.threshold:g}s of "
        f"real time: it is blocked outside the simulation at {describe_frame(frame)}"
    )
    details = f"  thread {holder.name!r} (innermost call last):\n{format_stack(frames)}\n"
    runtime.record_failure(
        "thread.watchdog", message, details + HINT, thread=holder.name, site=site_key(frame)
    )
    for st in {holder, resumed}:
        abandon(runtime, st)
    raise WatchdogInterrupt(message)


def abandon(runtime: ThreadRuntime, st: SimThread) -> None:
    """Give up on a thread stuck outside the model (or one that swallows every kill): it
    never runs again, and the interpreter will not wait for it at exit."""
    st.abandoned = True
    st.finished = True
    st.state = State.DONE
    if st.ident is not None:
        PARTICIPANTS.pop(st.ident, None)
    if st in runtime.threads:
        runtime.threads.remove(st)
    lock = getattr(st.thread, "_tstate_lock", None)
    shutdown_locks = getattr(threading, "_shutdown_locks", None)
    if lock is not None and shutdown_locks is not None:
        with threading._shutdown_locks_lock:  # type: ignore[attr-defined]
            shutdown_locks.discard(lock)


def loop_stuck(runtime: ThreadRuntime, frames: list[FrameType], tasks: Any) -> str:
    """Called by the monitor thread: the trio loop has been blocked outside the model.
    Records the failure and returns the report (printed if the process must end)."""
    frame = user_frame(frames)
    ids = {id(f) for f in frames}
    who = "the trio loop"
    for task in list(tasks):
        if id(getattr(task.coro, "cr_frame", None)) in ids:
            who = f"task {task.name!r}"
    message = (
        f"watchdog: {who} made no progress for {runtime.threshold:g}s of real time: "
        f"it blocks the trio loop outside the simulation at {describe_frame(frame)}"
    )
    details = f"  the trio loop (innermost call last):\n{format_stack(frames)}\n{HINT}"
    runtime.record_failure("thread.watchdog", message, details, site=site_key(frame))
    return f"{message}\n{details}"


def threads_report(runtime: ThreadRuntime) -> list[str]:
    """One entry per live thread and where it waits."""
    lines = []
    for st in sorted(runtime.threads, key=lambda t: t.seq):
        if st.state in (State.DONE, State.IDLE):
            continue
        frame = user_frame(stack_of(st.ident))
        node = st.node.name if st.node is not None else "-"
        kind = "daemon" if st.thread.daemon else "non-daemon"
        if not st.thread.daemon and node in runtime.exiting:
            kind += ": the node's main has returned, and a process waits at exit for it"
        if st.kind == "worker":
            kind = "trio.to_thread worker"
        how = {
            State.PARKED: "blocked",
            State.CALL: "waiting for the trio loop (trio.from_thread)",
        }.get(st.state, "ready")
        paused = ", node paused" if st.node is not None and st.node.paused else ""
        lines.append(
            f"  thread {st.name!r} on node {node!r} ({kind}{paused}), {how}\n"
            f"    at {describe_frame(frame)}"
        )
    return lines
