"""The simulated threads of one simulation: who runs them, wakes them, times them out, ends them.

Each simulated thread is *hosted* by a trio task (its own, or for ``trio.to_thread.run_sync``
the calling task). The host runs the thread when trio's scheduler runs the host, so the
simulation's strategies (random, PCT) choose among threads exactly as among tasks, with the
same seed. When the thread blocks, the host awaits the trio-side equivalent: a wakeup, a
timeout, a ``trio.from_thread`` call. While the trio loop itself is blocked in a synchronous
call (``future.result()`` in a task), only threads run; see ``_loop.py``.

Nothing here runs unless a program uses threads: no task, no stream, no trace event, so
thread-free programs keep their trace hashes. How threads end is in ``_exit.py``; how they fail
a run (the watchdog, reports) in ``_failures.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import outcome
import trio

from .._nodes import NodeState
from ._core import (
    KEY,
    KILL_PATIENCE,
    PARTICIPANTS,
    Loop,
    Real,
    SimThread,
    State,
    ThreadKilled,
    Wait,
    current,
)
from ._exit import close, kill_now, process_exit, reset_counters
from ._failures import abandon, loop_stuck, thread_stuck, threads_report
from ._hashing import install_stable_hashes
from ._preempt import Preemption
from ._timers import Timers
from ._watchdog import Stall, Watch, install_signal_handler, monitor, restore_signal_handler

if TYPE_CHECKING:
    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["ThreadRuntime"]


class ThreadRuntime:
    """Simulated threads of one :class:`~kelpie_dst.Simulation` (``sim.threads``)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.loop = Loop(self)
        self.threshold: float = sim.config.watchdog
        self.threads: list[SimThread] = []  # started and not finished, in creation order
        self.holder: SimThread | None = None  # None: the trio loop holds the baton
        self.pending: list[SimThread] = []  # woken off the trio loop: hosts to reschedule
        self.spawns: list[SimThread] = []  # started off the trio loop: hosts to start
        self.outside: list[Wait] = []  # woken by threads that are not participants
        self.idle: dict[Node | None, list[SimThread]] = {}  # to_thread workers per node
        self.retired: list[SimThread] = []  # idle workers of crashed nodes
        self.failure: tuple[str, str] | None = None  # (message, details): a liveness failure
        self.active = False
        self.closed = False
        self._closing = False
        self._seq = 0
        self._serial = 0
        self.timers = Timers(self)
        self._exited: trio.lowlevel.ParkingLot | None = None
        self._exit_pending = False
        self._preemption: Preemption | None = None
        self.saved: list[tuple[Any, str, Any]] = []  # module state to restore after the run
        self._first_activation = True
        self._signal: Any = None
        self._crash_hooked: set[str] = set()
        self._tasks: Callable[[], Any] = lambda: ()
        self.exiting: set[str] = set()  # nodes whose main returned, waiting for threads

    # -- stepping -------------------------------------------------------------------------------
    def activate(
        self,
        exempt: Callable[[], bool] = lambda: False,
        tasks: Callable[[], Any] = lambda: (),
    ) -> None:
        """While the simulation steps: this OS thread and the simulated threads participate.
        ``exempt()`` is true while the loop legitimately waits in real time (the watchdog
        leaves it alone then); ``tasks()`` lists trio's tasks, to name a stuck one."""
        self._tasks = tasks
        ident = self.activate_quietly()
        if self._first_activation:
            self._first_activation = False
            reset_counters(self)
        install_stable_hashes()
        self.active = True
        if self.threshold != math.inf:
            self._signal = install_signal_handler()
            monitor.watch(
                Watch(
                    ident,
                    self.threshold,
                    lambda: self.holder is not None or exempt(),
                    lambda frames: loop_stuck(self, frames, self._tasks()),
                    self._signal is not None,
                )
            )

    @property
    def loop_ident(self) -> int | None:
        """The OS thread that steps the simulation (the trio loop), once it has."""
        return getattr(self, "_loop_ident", None)

    def deactivate(self) -> None:
        monitor.unwatch(self._loop_ident)
        restore_signal_handler(self._signal)
        self._signal = None
        self.active = False
        self.deactivate_quietly()

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def next_serial(self) -> int:
        """Hashes of threads and futures made in this run (see ``_hashing``)."""
        self._serial += 1
        return (1 << 48) + self._serial

    def trace(self, kind: str, **fields: Any) -> None:
        if not self._closing:
            self.sim.trace_event(kind, **fields)

    @property
    def preemption(self) -> Preemption | None:
        if self._preemption is None and self.sim.config.preemption:
            self._preemption = Preemption(self.sim.rng("threads/preempt"))
        return self._preemption

    # -- the baton ------------------------------------------------------------------------------
    def run_thread(self, st: SimThread) -> None:
        """Hand ``st`` the baton and wait until it hands it back (or the watchdog trips)."""
        previous = self.holder
        self.holder = st
        st.state = State.RUNNING
        st.go.release()
        try:
            self.wait_back(st)
        finally:
            self.holder = previous
        if st.state is State.DONE:
            self._finished(st)

    def wait_back(self, st: SimThread) -> None:
        back = st.back
        pause = max(0.005, min(0.1, self.threshold / 4))
        if back.acquire(True, pause):
            return
        stall = Stall()
        while True:
            holder = self.holder or st
            native = holder.thread.native_id
            if stall.observe(holder.ident, Real.monotonic(), native) >= self.threshold:
                thread_stuck(self, holder, st)
            if back.acquire(True, pause):
                return

    # -- readiness ------------------------------------------------------------------------------
    def make_ready(self, st: SimThread, value: outcome.Outcome[Any] | None) -> None:
        st.state = State.READY
        st.value = value
        st.wait = None
        if st.host_waiting:
            if current() is self.loop:
                st.host_waiting = False
                trio.lowlevel.reschedule(st.host)
            else:
                self.pending.append(st)

    def wake_from_outside(self, wait: Wait) -> None:
        """A thread outside the simulation woke ``wait``: apply it on the trio loop."""
        self.outside.append(wait)
        token = self.sim._token
        if token is not None:
            try:
                token.run_sync_soon(self._apply_outside)
            except trio.RunFinishedError:
                pass

    def _apply_outside(self) -> None:
        from ._primitives import wake

        outside, self.outside = self.outside, []
        for wait in outside:
            wake(wait)

    def flush(self) -> None:
        """On the trio loop, after a thread handed the baton back: reschedule the hosts it
        woke, start the hosts of threads it started, arm its timeouts."""
        if self.outside:
            self._apply_outside()
        while self.pending:
            st = self.pending.pop(0)
            if st.host_waiting and st.state is State.READY:
                st.host_waiting = False
                trio.lowlevel.reschedule(st.host)
        while self.spawns:
            self.spawn_host(self.spawns.pop(0))
        if self.timers.changed:
            self.timers.arm()
        if self._exit_pending and self._exited is not None:
            self._exit_pending = False
            self._exited.unpark_all()

    def recheck(self, node: Node | None = None) -> None:
        """Wake the hosts of ``node``'s parked threads (all, if None) so they notice that
        their node crashed or the run is ending."""
        for st in list(self.threads):
            if st.host_waiting and (node is None or st.node is node):
                st.host_waiting = False
                trio.lowlevel.reschedule(st.host)

    # -- hosting --------------------------------------------------------------------------------
    def spawn_host(self, st: SimThread) -> None:
        """Start the trio task that runs plain thread ``st``, on its node."""
        node = st.node
        name = f"kelpie_dst.thread[{st.name}]"
        if node is None:
            self.sim._spawn(self._host, st, name=name)
        elif node.alive:
            if node.name not in self._crash_hooked:
                self._crash_hooked.add(node.name)
                node.crash_hooks.append(self._on_crash)
            node.start_soon(self._host, st, name=name)
        else:  # its node died before the thread could run
            kill_now(self, st)

    async def _host(self, st: SimThread) -> None:
        await self.serve(st)

    async def serve(self, st: SimThread) -> None:
        """Run ``st`` from this task until it finishes (or, a worker, its job is done)."""
        st.host = trio.lowlevel.current_task()
        cancelled: BaseException | None = None
        while st.state is not State.DONE and st.state is not State.IDLE:
            if not st.killed and self._doomed(st):
                self.kill(st)
            if st.refusals >= KILL_PATIENCE:  # it swallows every kill: leave it parked
                abandon(self, st)
                break
            state = st.state
            if state is State.READY:
                self.run_thread(st)
                self.flush()
            elif state is State.CALL:
                call, st.call = st.call, None
                assert call is not None
                result = await outcome.acapture(call)
                if st.state is State.CALL:
                    st.state, st.value = State.READY, outcome.Value(result)
            elif state is State.YIELDED:
                st.state, st.value = State.READY, None
                await trio.lowlevel.cancel_shielded_checkpoint()
            else:
                try:
                    await self._wait_host(st)
                except trio.Cancelled as error:
                    if not self._doomed(st):  # abandon_on_cancel: another task takes over
                        self._adopt(st)
                        raise
                    cancelled = error
        if cancelled is not None:
            raise cancelled

    async def _wait_host(self, st: SimThread) -> None:
        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            if st.abandon_on_cancel or self._doomed(st):
                st.host_waiting = False
                return trio.lowlevel.Abort.SUCCEEDED
            st.cancel_register[0] = raise_cancel  # for trio.from_thread.check_cancelled
            return trio.lowlevel.Abort.FAILED

        st.host_waiting = True
        await trio.lowlevel.wait_task_rescheduled(abort)

    def _doomed(self, st: SimThread) -> bool:
        node = st.node
        if node is not None and node.state in (NodeState.DOWN, NodeState.STOPPED):
            return True
        scope = self.sim._root_scope
        return scope is not None and scope.cancel_called

    def kill(self, st: SimThread) -> None:
        """Make ``st`` raise :class:`ThreadKilled` when it next runs, and at every blocking
        call after that."""
        st.killed = True
        if st.state in (State.PARKED, State.YIELDED, State.READY, State.NEW):
            if st.wait is not None:
                st.wait.done = True
            st.wait = None
            st.state, st.value = State.READY, outcome.Error(ThreadKilled())
        self.trace("thread.kill", thread=st.name)

    def _adopt(self, st: SimThread) -> None:
        """``to_thread.run_sync(abandon_on_cancel=True)`` was cancelled: the thread runs on
        in the background, hosted by a task of its own."""
        st.adopted = True

        async def adopted() -> None:
            try:
                await self.serve(st)
            finally:
                if st.release is not None:
                    st.release()
                self.return_worker(st)

        name = f"kelpie_dst.thread[{st.name}]"
        if st.node is not None and st.node.alive:
            st.node.start_soon(adopted, name=name)
        else:
            self.sim._spawn(adopted, name=name)

    def _on_crash(self, node: Node) -> None:
        self.retired.extend(self.idle.pop(node, []))
        self.recheck(node)

    # -- workers (trio.to_thread) ---------------------------------------------------------------
    def return_worker(self, st: SimThread) -> None:
        if st.state is State.IDLE and st.node is not None and not st.node.alive:
            self.retired.append(st)
        elif st.state is State.IDLE:
            self.idle.setdefault(st.node, []).append(st)

    def exit_worker(self, st: SimThread) -> None:
        st.job = None
        st.state, st.value = State.READY, None
        self.run_thread(st)

    # -- finishing ------------------------------------------------------------------------------
    def _finished(self, st: SimThread) -> None:
        """``st``'s OS thread has run its last Python code: wait for it to really end, so
        ``is_alive()`` agrees, then wake whoever joins it."""
        Real.thread_join(st.thread, None if self.threshold == math.inf else self.threshold)
        st.finished = True
        st.thread.__dict__.pop(KEY, None)  # the Thread no longer pins the run
        if st in self.threads:
            self.threads.remove(st)
        from ._primitives import wake

        for wait in st.joiners:
            wake(wait)
        st.joiners = []
        if st.kind == "thread":
            self.trace("thread.exit", thread=st.name)
        if self._exited is not None and not self._closing:
            if current() is self.loop and self.holder is None:
                self._exited.unpark_all()
            else:
                self._exit_pending = True

    def exited(self) -> trio.lowlevel.ParkingLot:
        """Where ``process_exit`` waits: unparked whenever a thread finishes."""
        if self._exited is None:
            self._exited = trio.lowlevel.ParkingLot()
        return self._exited

    async def process_exit(self, node: Node) -> None:
        """``node``'s main returned: see :func:`._exit.process_exit`."""
        await process_exit(self, node)

    def close(self) -> None:
        """After the run (``Session.__exit__``): see :func:`._exit.close`."""
        if not self.closed:
            self._closing = True
            try:
                close(self)
            finally:
                self.closed = True

    def threads_report(self) -> list[str]:
        """Where each live thread waits, for the blocked-tasks report of a deadlock."""
        return threads_report(self)

    def activate_quietly(self) -> int:
        """Register this OS thread (the loop) and the live threads as participants."""
        ident = Real.get_ident()
        self._loop_ident = ident
        PARTICIPANTS[ident] = self.loop
        for st in self.threads:
            if st.ident is not None:
                PARTICIPANTS[st.ident] = st
        return ident

    def deactivate_quietly(self) -> None:
        PARTICIPANTS.pop(self._loop_ident, None)
        for st in [*self.threads, *self.retired]:
            if st.ident is not None:
                PARTICIPANTS.pop(st.ident, None)

    # -- failures -------------------------------------------------------------------------------
    def record_failure(self, kind: str, message: str, details: str, **fields: Any) -> None:
        if self.failure is None:
            self.failure = (message, details)
            self.trace(kind, **fields)

    def block_loop(self, wait: Wait) -> bool:
        from ._loop import block_loop

        return block_loop(self, wait)
