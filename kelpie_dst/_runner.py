"""The runner: trio in guest mode on a synchronous host loop, with the virtual clock.

trio's guest mode unrolls its event loop into callbacks that the host runs. Here the host is a
plain deque drained on the calling thread, so the whole run is one thread and nothing happens
between callbacks that the simulation does not control. The same machinery serves a whole run
(:func:`run`) and a persistent simulation driven one step at a time
(:func:`open_simulation`), for pytest and Hypothesis.
"""

from __future__ import annotations

import collections
import gc
import random
import time
import warnings
from collections.abc import Awaitable, Callable
from queue import Empty as _Empty
from typing import Any, TypeVar

import outcome
import trio

from . import _buggify
from ._blocked import blocked_tasks_report
from ._clock import Interrupt
from ._errors import DstError, LivenessError, SimulationCrashed, UsageError
from ._guards_state import ModuleRandomState
from ._nodes import NODE
from ._rng import derive_seed, state_digest
from ._sched import installed_scheduler, trace_timers
from ._sim import Simulation
from ._trace import Trace, sanitize
from ._trio_polls import gate, ungate
from .threads._core import Real

__all__ = ["Session"]

T = TypeVar("T")
_TEARDOWN_GRACE = 60.0  # virtual seconds a cancelled simulation gets to unwind
_GRAVEYARD: list[object] = []  # coroutines of abandoned runs (see Session._abandon)


class _Instrument(trio.abc.Instrument):
    """Traces task spawn and exit, attributed to the task's node."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def _emit(self, kind: str, task: trio.lowlevel.Task, **fields: object) -> None:
        node = task.context.get(NODE, None)
        self.sim.trace.emit(
            self.sim.clock.current_time(),
            node.name if node is not None else "-",
            kind,
            {"task": sanitize(task.name), **fields},
        )

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        # n: the task's number in the trace's scheduling decisions (sched events)
        self._emit("task.spawn", task, n=self.sim.strategy.register(task))

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._emit("task.exit", task)
        self.sim.strategy.forget(task)


class _Host:
    """The host loop: a deque of callbacks from trio, drained synchronously."""

    def __init__(self, gc_every: int) -> None:
        self.queue: collections.deque[Callable[[], object]] = collections.deque()
        self.active = False
        self.outcome: outcome.Outcome[Any] | None = None
        self.gc_every = gc_every
        self.callbacks = 0
        self.waiting_real = False  # in _wait_for_thread: the watchdog leaves the loop alone
        # Real (never simulated) primitives: trio's I/O thread rings the bell from outside.
        self._bell = Real.simple_queue()

    def schedule(self, fn: Callable[[], object]) -> None:
        self.queue.append(fn)

    def schedule_threadsafe(self, fn: Callable[[], object]) -> None:
        self.queue.append(fn)
        self._bell.put(None)

    def done(self, result: outcome.Outcome[Any]) -> None:
        self.outcome = result
        self.active = False

    def stop(self) -> None:
        self.active = False

    def drive(self) -> None:
        """Run callbacks until something calls :meth:`stop` (or the run finishes)."""
        self.active = True
        queue = self.queue
        pop = queue.popleft
        gc_every = self.gc_every
        count = self.callbacks
        try:
            while self.active:
                if not queue:
                    self._wait_for_thread()
                    continue
                pop()()
                count += 1
                if count % gc_every == 0:
                    gc.collect(0 if count % (gc_every * 64) else 1)
        finally:
            self.callbacks = count

    def _wait_for_thread(self) -> None:
        # Only reachable when trio waits for real I/O in its worker thread, which the virtual
        # clock avoids except for wait_all_tasks_blocked(cushion > 0).
        deadline = Real.monotonic() + 60.0
        self.waiting_real = True
        try:
            while not self.queue:
                remaining = deadline - Real.monotonic()
                if remaining <= 0:
                    raise DstError("trio is waiting for real I/O; simulations cannot do real I/O")
                try:
                    self._bell.get(timeout=remaining)
                except _Empty:
                    pass
        finally:
            self.waiting_real = False


class Session:
    """One simulation's lifetime: global hooks installed, guest run started, driven, torn down.

    Only one session can be open per thread (trio allows one run per thread).
    """

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.host = _Host(sim.config.gc_every)
        self._guest_state: Any = None
        self._saved_random: object = None
        self._gc_was_enabled = True
        self._scheduler_cm: Any = None
        self.wall_start = 0.0
        self.abandoned = False

    # -- global state ----------------------------------------------------------------------
    def __enter__(self) -> Session:
        if _buggify._CURRENT[0] is not None:
            raise DstError("a simulation is already open in this thread; close it first")
        if trio.lowlevel.in_trio_run():
            raise DstError("a simulation cannot start inside trio.run(); call it from sync code")
        self.wall_start = time.perf_counter()
        self._saved_random = random.getstate()
        random.seed(derive_seed(self.sim.seed, "global-random"))
        self._module_random = ModuleRandomState(self.sim.seed)  # tempfile's names, numpy
        self._module_random.enter()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        self._scheduler_cm = installed_scheduler(self.sim.strategy)
        self._scheduler_cm.__enter__()
        _buggify._CURRENT[0] = self.sim
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._guest_state is not None:
            ungate(self._guest_state.runner)
        self.sim.guards.uninstall()
        self.sim.threads.close()
        _buggify._CURRENT[0] = None
        self._scheduler_cm.__exit__(None, None, None)
        random.setstate(self._saved_random)  # type: ignore[arg-type]
        self._module_random.exit()
        if self._gc_was_enabled:
            gc.enable()

    # -- driving ---------------------------------------------------------------------------
    def start(self, root: Callable[..., Awaitable[object]], *args: Any) -> None:
        sim = self.sim
        sim.clock.on_interrupt = self.host.stop
        sim.clock.host = self.host
        horizon = {"horizon": sim.config.pct_horizon} if sim.strategy.name == "pct" else {}
        sim.trace_event(
            "run.start",
            seed=sim.seed,
            strategy=sim.strategy.name,
            faults=[f.describe() for f in sim.fault_list],
            **horizon,
        )
        trio.lowlevel.start_guest_run(
            root,
            *args,
            run_sync_soon_threadsafe=self.host.schedule_threadsafe,
            run_sync_soon_not_threadsafe=self.host.schedule,
            done_callback=self.host.done,
            clock=sim.clock,
            instruments=[_Instrument(sim)],
            strict_exception_groups=True,
        )
        # start_guest_run's last act is to queue its first tick: keep the guest state, so a
        # run whose tasks refuse to die can still be abandoned cleanly.
        self._guest_state = self.host.queue[-1].__self__  # type: ignore[attr-defined]
        gate(self._guest_state.runner)  # its empty zero-timeout polls skipped (Dspeed-16)
        if Trace.SCHEDULE:  # every scheduling decision goes into the trace (_trace.py)
            sim.strategy.ran = sim.trace.ran
            trace_timers(self._guest_state.runner, sim.trace.timers)

    def drive(self) -> None:
        """Drive until the current goal stops the host, the run ends, or the clock interrupts.

        The guards are on only while this runs (the host may use the real clock between steps),
        and so are the simulated threads and the watchdog.
        """
        self.sim.guards.install()
        self.sim.threads.activate(exempt=lambda: self.host.waiting_real, tasks=self._tasks)
        try:
            self.host.drive()
        finally:
            self.sim.threads.deactivate()
            self.sim.guards.uninstall()

    def _tasks(self) -> Any:
        state = self._guest_state
        return state.runner.tasks if state is not None else ()

    @property
    def finished(self) -> bool:
        return self.host.outcome is not None or self.abandoned

    def interrupt_error(self) -> LivenessError | None:
        """The liveness failure the clock or the threads (a deadlock while the trio loop was
        blocked, the watchdog) reported, if any, with the blocked tasks and threads."""
        failure = self.sim.threads.failure
        if failure is not None:
            return LivenessError(*failure)
        why = self.sim.clock.interrupt
        if why is None:
            return None
        now = self.sim.now()
        report = blocked_tasks_report(self.sim)
        if why == Interrupt.DEADLOCK:
            message = (
                f"deadlock at t={now:.6f}s: no task can run and no timer is pending; "
                "blocked tasks are listed below"
            )
        elif why == Interrupt.LIVELOCK:
            message = (
                f"livelock at t={now:.6f}s: tasks ran {self.sim.clock.instant_steps:,} steps "
                f"without virtual time moving (simulation.livelock_steps = "
                f"{self.sim.config.livelock_steps:,}): something yields but never waits; "
                "the tasks are listed below"
            )
        else:
            message = (
                f"virtual time limit of {self.sim.config.max_time:g}s reached before the "
                "program finished"
            )
        return LivenessError(message, report)

    def cancel_everything(self) -> None:
        """Cancel the root scope and drive until the run ends (or abandon it if it won't)."""
        if self.finished:
            return
        sim = self.sim
        sim.clock.clear_interrupt()
        sim.clock.time_limit = sim.now() + _TEARDOWN_GRACE
        assert sim._token is not None and sim._root_scope is not None
        sim._token.run_sync_soon(sim.cancel_all)
        while not self.finished:
            self.drive()
            if sim.clock.interrupt is not None and self.host.outcome is None:
                self._abandon()

    def _abandon(self) -> None:
        """Tasks ignored cancellation (shielded forever): close trio's run generator.

        The tasks' coroutines are kept alive on purpose: closing them later, at garbage
        collection, would run trio abort code against an event loop that no longer exists.
        """
        _GRAVEYARD.extend(task.coro for task in self._guest_state.runner.tasks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            self._guest_state.unrolled_run_gen.close()
        self.host.queue.clear()
        self.abandoned = True
        self.sim.trace_event("run.abandoned")

    def wall_seconds(self) -> float:
        return time.perf_counter() - self.wall_start


def stream_digests(sim: Simulation) -> dict[str, str]:
    """The state digest of every random stream of the run: the named ones, the global
    ``random`` module (``<random>``) and the scheduler (``<scheduler>``), so a run that draws
    a different number of times from any of them has a different ``run.end`` event."""
    digests = {name: s.digest() for name, s in sorted(sim._streams.items())}
    digests["<random>"] = state_digest(random._inst)
    digests["<scheduler>"] = state_digest(sim.strategy)
    return digests


def unwrap_crash(result: outcome.Outcome[Any]) -> BaseException | None:
    """The exception a finished run ended with, if any."""
    if isinstance(result, outcome.Error):
        return result.error
    return None


def simulation_crashed(error: BaseException) -> SimulationCrashed:
    crash = SimulationCrashed(f"the simulation ended with an exception: {error!r}")
    crash.__cause__ = error
    return crash


def check_main_signature(main: Callable[..., Any]) -> bool:
    """True when ``main`` takes the simulation as its one argument."""
    import inspect

    try:
        params = list(inspect.signature(main).parameters.values())
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(required) > 1:
        raise UsageError(
            f"{getattr(main, '__qualname__', main)!r} must take no arguments or one "
            "(the simulation)"
        )
    return len(required) == 1
