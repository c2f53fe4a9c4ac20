"""A persistent simulation driven one step at a time (for pytest, Hypothesis and REPLs).

    with kelpie_dst.open_simulation(seed=7) as handle:
        handle.step(server.start)
        handle.advance(30)          # 30 virtual seconds pass
        assert handle.step(client.get, "k") == b"v"

Virtual time moves only inside :meth:`step` and :meth:`advance`; between them the simulation is
frozen, and the real clock belongs to the host again (the guards are off).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import IO, Any, TypeVar

import outcome
import trio

from ._clock import DEFAULT_LIVELOCK_STEPS
from ._errors import DstError
from ._faults import Fault
from ._runner import Session, simulation_crashed
from ._sim import DEFAULT_EPOCH, Simulation, make_config
from ._trace import Trace, open_trace_file
from .threads._watchdog import DEFAULT_WATCHDOG

__all__ = ["SimulationHandle", "open_simulation"]

T = TypeVar("T")


class SimulationHandle:
    """An open simulation. Use :func:`open_simulation` to create one; close it when done."""

    def __init__(self, sim: Simulation, owned_file: IO[bytes] | None = None) -> None:
        self.sim = sim
        self._owned_file = owned_file  # a trace file opened from a path, closed with the handle
        self._session = Session(sim)
        self._session.__enter__()
        self.closed = False
        self.steps = 0
        try:
            self._session.start(_stepping_root, sim, self._session)
            self._session.drive()  # until the root is ready
            self._raise_if_dead()
        except BaseException:
            self.close()
            raise

    # -- stepping ------------------------------------------------------------------------------
    def step(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the main node; return its value or raise its exception.

        Other tasks (servers, background work, faults) run meanwhile, in virtual time. A
        deadlock, or reaching the time limit, raises :class:`LivenessError`; if a background
        task crashes the simulation, :class:`SimulationCrashed` is raised and the handle closes.
        """
        self._check_open()
        box: list[outcome.Outcome[T]] = []
        session = self._session
        main = self.sim.node(self.sim.main_node_name)

        async def body() -> None:
            try:
                box.append(outcome.Value(await fn(*args)))
            except BaseException as error:
                box.append(outcome.Error(error))
            finally:
                session.host.stop()

        def inject() -> None:
            main.start_soon(body, name=f"kelpie_dst.step[{self.steps}]")

        self.steps += 1
        assert self.sim._token is not None
        self.sim._token.run_sync_soon(inject)
        session.drive()
        liveness = session.interrupt_error()
        if liveness is not None:
            self.close()
            raise liveness
        if box and isinstance(box[0], outcome.Error) and isinstance(box[0].error, trio.Cancelled):
            # Steps are only cancelled when the simulation itself is dying (a background task
            # raised): let it finish unwinding, then report why.
            while not session.finished:
                session.drive()
        self._raise_if_dead()
        return box[0].unwrap()

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass, running whatever is due meanwhile."""
        self.step(trio.sleep, seconds)

    def settle(self) -> None:
        """Run every task that can run now, without advancing virtual time."""
        import trio.testing  # imports pytest: only when used

        self.step(trio.testing.wait_all_tasks_blocked)

    @property
    def time(self) -> float:
        return self.sim.now()

    @property
    def trace_hash(self) -> str:
        # includes the scheduling decisions since the last event, without emitting them
        return self.sim.trace.hexdigest(self.sim.now())

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Cancel everything still running, tear the simulation down, restore global state."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.sim._token is not None and not self._session.finished:
                self._session.cancel_everything()
            self.sim.trace.finish(self.sim.now())
        finally:
            self._session.__exit__(None, None, None)
            if self._owned_file is not None:
                self._owned_file.close()

    def __enter__(self) -> SimulationHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise DstError("this simulation is closed")

    def _raise_if_dead(self) -> None:
        result = self._session.host.outcome
        if result is None:
            return
        self.close()
        if isinstance(result, outcome.Error):
            raise simulation_crashed(result.error)
        raise DstError("the simulation ended unexpectedly")


async def _stepping_root(sim: Simulation, session: Session) -> None:
    sim._token = trio.lowlevel.current_trio_token()
    with trio.CancelScope() as scope:
        sim._root_scope = scope
        async with trio.open_nursery() as nursery:
            sim._nursery = nursery
            sim._start_background()
            ready = trio.Event()

            async def main_node(_node: object) -> None:
                ready.set()
                await trio.sleep_forever()

            sim.add_node(sim.main_node_name, main_node)
            await ready.wait()
            session.host.stop()
            await trio.sleep_forever()


def open_simulation(
    *,
    seed: int = 0,
    strategy: str = "random",
    pct_depth: int = 3,
    guards: str = "redirect",
    guard_allow: Iterable[str] = (),
    faults: Iterable[Fault | str] = (),
    swarm: bool = False,
    max_time: float | None = None,
    epoch: float = DEFAULT_EPOCH,
    buggify: bool = True,
    hazards: Iterable[str] = (),
    record: bool = False,
    trace_file: IO[bytes] | str | os.PathLike[str] | None = None,
    pct_horizon: int | None = None,
    watchdog: float = DEFAULT_WATCHDOG,
    preemption: bool = True,
    livelock_steps: int = DEFAULT_LIVELOCK_STEPS,
) -> SimulationHandle:
    """Open a persistent simulation; the options are those of :func:`kelpie_dst.run`. A trace
    file given by path is complete once the handle is closed. There is no program to calibrate
    PCT's horizon on: without ``pct_horizon``, its change points are drawn log-uniformly."""
    config = make_config(
        seed=seed,
        strategy=strategy,
        pct_depth=pct_depth,
        guards=guards,
        guard_allow=guard_allow,
        faults=faults,
        swarm=swarm,
        max_time=max_time,
        epoch=epoch,
        buggify=buggify,
        hazards=hazards,
        record=record,
        pct_horizon=pct_horizon,
        watchdog=watchdog,
        preemption=preemption,
        livelock_steps=livelock_steps,
    )
    if not isinstance(trace_file, str | os.PathLike):
        return SimulationHandle(Simulation(config, Trace(record=record, file=trace_file)))
    sink = open_trace_file(trace_file)
    try:
        return SimulationHandle(Simulation(config, Trace(record=record, file=sink)), sink)
    except BaseException:
        sink.close()
        raise
