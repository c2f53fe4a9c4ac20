"""The trio loop blocked in a synchronous call: only simulated threads run.

A trio task that calls ``future.result()``, ``thread.join()``, ``queue.get()`` or ``time.sleep``
(sync code, no ``await``) blocks the whole event loop, in a real program as here. Until the
call returns, no task runs, and the simulated threads run by themselves: the ready ones are
picked from the seed (the ``threads/loop`` stream), virtual time jumps to the next timeout when
none is ready. If none can ever be ready, the program is deadlocked, as a real one would hang:
the run fails (exit 2) naming the blocked call and every thread's position.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from ._core import State, Wait
from ._report import describe_frame, site_key, stack_of, user_frame

if TYPE_CHECKING:
    from ._core import SimThread
    from ._runtime import ThreadRuntime

__all__ = ["LoopBlocked", "block_loop"]


class LoopBlocked(BaseException):
    """Unwinds a trio task whose blocking call can never return (the run then fails)."""


def block_loop(runtime: ThreadRuntime, wait: Wait) -> bool:
    """Block the trio loop until ``wait`` is woken (True) or times out (False)."""
    sim = runtime.sim
    if wait.deadline is not None:
        runtime.timers.add(wait)
    announced = False
    try:
        while not wait.done:
            runtime.flush()
            ready = _ready(runtime)
            if ready:
                if not announced:
                    announced = True
                    runtime.trace("thread.loop_blocked", site=_loop_site())
                st = _pick(runtime, ready)
                if st.state is State.YIELDED:
                    st.state, st.value = State.READY, None
                if not st.killed and runtime._doomed(st):
                    runtime.kill(st)
                runtime.trace("thread.run", thread=st.name)
                runtime.run_thread(st)
                continue
            deadline = runtime.timers.next_deadline()
            if deadline == math.inf:
                _fail(runtime, "deadlock", "and no simulated thread can run")
            if deadline > sim.clock.time_limit:
                _fail(runtime, "time_limit", "until the virtual time limit")
            sim.clock.advance_to(deadline)
            runtime.timers.expire_due(deadline)
    finally:
        runtime.flush()
    return not wait.timed_out


def _ready(runtime: ThreadRuntime) -> list[SimThread]:
    return [
        st
        for st in runtime.threads
        if st.state in (State.READY, State.YIELDED) and not (st.node is not None and st.node.paused)
    ]


def _pick(runtime: ThreadRuntime, ready: list[SimThread]) -> SimThread:
    """One scheduling decision among the ready threads, by the run's strategy: it orders
    them as it orders a batch of trio tasks (``_order``: a seeded shuffle, or PCT's priorities,
    each thread having its own), the step counts towards PCT's change points, and the last one
    runs, as in trio's run loop. Threads of paused nodes are already left out; the decision is
    traced as ``thread.run``."""
    strategy = runtime.sim.strategy
    strategy.steps += len(ready)
    if len(ready) == 1:
        return ready[0]
    batch = list(ready)
    strategy._order(batch)
    return batch[-1]


def _loop_site() -> str:
    return site_key(user_frame(stack_of(_ident())))


def _ident() -> int:
    from ._core import Real

    return Real.get_ident()


def _fail(runtime: ThreadRuntime, why: str, tail: str) -> None:
    frames = stack_of(_ident())
    frame = user_frame(frames)
    try:
        task = f"task {trio.lowlevel.current_task().name!r}"
    except RuntimeError:
        task = "the trio loop"
    now = runtime.sim.now()
    if why == "deadlock":
        message = (
            f"deadlock at t={now:.6f}s: {task} blocks the trio loop at "
            f"{describe_frame(frame)}, {tail}"
        )
    else:
        message = (
            f"virtual time limit of {runtime.sim.config.max_time:g}s reached at t={now:.6f}s: "
            f"{task} blocks the trio loop at {describe_frame(frame)} {tail}"
        )
    lines = runtime.threads_report() or ["  (no simulated threads are alive)"]
    details = "threads:\n" + "\n".join(lines)
    runtime.record_failure(f"thread.{why}", message, details, site=site_key(frame))
    raise LoopBlocked(message)
