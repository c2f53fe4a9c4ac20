"""How simulated threads end: a node's exit, a kill without a host, the end of a run.

* :func:`process_exit`: a node's main returned. As the interpreter does at exit, the node shuts
  down the ``ThreadPoolExecutor``s whose workers run on it and waits for its non-daemon threads
  (a thread that never ends is then a liveness failure, as the process would never exit).
* :func:`kill_now`: kill a thread synchronously, from whoever holds the baton.
* :func:`close`: after the run, kill what is left, end the idle ``to_thread`` workers, and
  restore the module state the run replaced (thread-name counters).
"""

from __future__ import annotations

import itertools
import sys
from typing import TYPE_CHECKING, Any

import outcome

from ._core import KEY, KILL_PATIENCE, State, ThreadKilled
from ._failures import abandon

if TYPE_CHECKING:
    from .._nodes import Node
    from ._core import SimThread
    from ._runtime import ThreadRuntime

__all__ = ["close", "kill_now", "process_exit", "reset_counters"]

# Thread-name counters that module state would otherwise carry from one run to the next.
_COUNTERS: tuple[tuple[str, str | None, str, int], ...] = (
    ("threading", None, "_counter", 1),
    ("concurrent.futures.thread", "ThreadPoolExecutor", "_counter", 0),
)


async def process_exit(runtime: ThreadRuntime, node: Node) -> None:
    """``node``'s main returned: shut down its thread pools and wait for its non-daemon
    threads. Without threads, returns at once (no checkpoint, no event)."""
    live = [
        st
        for st in runtime.threads
        if st.node is node and st.kind == "thread" and not st.thread.daemon
    ]
    if not live:
        return
    runtime.trace("thread.process_exit", threads=[st.name for st in live])
    runtime.exiting.add(node.name)
    pools: Any = sys.modules.get("concurrent.futures.thread")
    saved = None
    if pools is not None:  # what concurrent.futures' atexit hook (_python_exit) does
        queues = [q for t, q in list(pools._threads_queues.items()) if t.__dict__.get(KEY) in live]
        if queues:
            saved = pools._shutdown
            pools._shutdown = True
        for q in queues:
            q.put(None)
    exited = runtime.exited()
    try:
        while not all(st.finished for st in live):
            await exited.park()
    finally:
        runtime.exiting.discard(node.name)
        if saved is not None and pools is not None:
            pools._shutdown = saved


def kill_now(runtime: ThreadRuntime, st: SimThread) -> None:
    """Kill ``st`` synchronously (no host), running its unwinding to the end."""
    st.host_waiting = False
    while st.refusals < KILL_PATIENCE:  # see SimThread.refuse
        if st.state in (State.DONE, State.IDLE) or st.abandoned:
            break
        if not st.killed or st.state is not State.READY:
            runtime.kill(st)
            st.state, st.value = State.READY, outcome.Error(ThreadKilled())
        runtime.run_thread(st)
    if st.state is State.IDLE:
        runtime.exit_worker(st)
    elif st.state is not State.DONE:  # it swallows every kill: leave it, parked for good
        abandon(runtime, st)


def close(runtime: ThreadRuntime) -> None:
    """End every thread still alive (their nodes are gone with the run), exit the idle
    workers, restore the module state this run replaced. Nothing is traced any more."""
    for st in runtime.threads:  # their hosts are gone with the trio run: never reschedule
        st.host_waiting = False
    runtime.pending.clear()
    was_active = runtime.active
    if not was_active:
        runtime.activate_quietly()
    try:
        for st in sorted(runtime.threads, key=lambda t: t.seq):
            if not st.abandoned and not st.finished and st.state is not State.IDLE:
                kill_now(runtime, st)
        for workers in [*runtime.idle.values(), runtime.retired]:
            for st in workers:
                if st.state is State.IDLE:
                    runtime.exit_worker(st)
        runtime.idle.clear()
        runtime.retired.clear()
    finally:
        if not was_active:
            runtime.deactivate_quietly()
        for holder, attr, value in reversed(runtime.saved):
            setattr(holder, attr, value)
        runtime.saved.clear()


def reset_counters(runtime: ThreadRuntime) -> None:
    """Fresh thread-name counters for this run (the old ones are restored by :func:`close`)."""
    for module_name, class_name, attr, first in _COUNTERS:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        holder = getattr(module, class_name) if class_name else module
        runtime.saved.append((holder, attr, getattr(holder, attr)))
        setattr(holder, attr, itertools.count(first).__next__)
