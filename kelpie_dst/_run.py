"""``kelpie_dst.run``: run one async program to completion in a seeded simulation."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from typing import IO, Any

import attrs
import outcome
import trio

from ._clock import DEFAULT_LIVELOCK_STEPS
from ._errors import FailureKind, NondeterminismError
from ._faults import Fault
from ._nodes import Node
from ._pct import horizon_for
from ._reports import classify, format_exception
from ._result import Failure, RunResult
from ._runner import Session, check_main_signature, stream_digests
from ._sim import DEFAULT_EPOCH, SimConfig, Simulation, make_config
from ._trace import Trace, open_trace_file
from .threads._watchdog import DEFAULT_WATCHDOG

__all__ = ["run"]


def run(
    main: Callable[..., Awaitable[Any]],
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
) -> RunResult:
    """Run ``async def main()`` (or ``main(sim)``) in a fresh simulation; never raises for a
    failure of the program, which is reported in :attr:`RunResult.failure`.

    * ``seed`` decides everything: scheduling, fault decisions, the streams, the global
      ``random`` module, and guarded values.
    * ``strategy``: ``"random"`` (a uniform shuffle of each batch) or ``"pct"`` (priorities
      with ``pct_depth - 1`` change points, spread over ``pct_horizon`` task steps; by default
      the length of a calibration run of ``main`` with seed 0, when ``main`` has an importable
      name, see ``_pct.py``).
    * ``guards``: ``"redirect"``, ``"strict"`` or ``"off"`` (see :mod:`kelpie_dst._guards`);
      ``guard_allow`` lists module prefixes exempt from ``strict``.
    * ``faults``: :class:`Fault` objects or ``"TYPE=PROBABILITY"`` strings; ``swarm=True``
      lets the seed add a random fault profile.
    * ``max_time``: the virtual time limit; reaching it is a liveness failure.
    * ``hazards``: dormant BUGGIFY sites to arm for the whole run (``DORMANT_SITES``; a
      scenario's ``[simulation] hazards``). Unarmed, they never fire and leave no trace.
    * ``record=True`` keeps every event in memory; ``trace_file`` streams them to a binary
      file object, or to a path (gzip-compressed if it ends in ``.gz``), which
      :func:`kelpie_dst.load_trace` reads back with the same hash.
    * ``watchdog``: seconds of real time a call may block outside the simulation (C code,
      real I/O, a lock created before the run) before the run fails as a liveness violation
      naming the thread or task and its line (docs/threads.md).
    * ``preemption``: seeded preemption points inside simulated threads (on by default), so
      races between threads on plain data are found.
    * ``livelock_steps``: task steps the program may run at one virtual instant (time not
      moving) before the run fails as a livelock, a liveness violation listing the tasks
      (docs/faults.md); 0 turns the check off.
    """
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
        watchdog=watchdog,
        preemption=preemption,
        livelock_steps=livelock_steps,
    )
    takes_sim = check_main_signature(main)
    if config.strategy == "pct" and pct_horizon is None:
        # the program's length, from a seed-independent calibration run (_pct.py)
        pct_horizon = horizon_for(main, config, lambda c: _run(c, main, takes_sim, None).steps)
    config = attrs.evolve(config, pct_horizon=pct_horizon)
    if not isinstance(trace_file, str | os.PathLike):
        return _run(config, main, takes_sim, trace_file)
    with open_trace_file(trace_file) as sink:
        return _run(config, main, takes_sim, sink)


def _run(
    config: SimConfig,
    main: Callable[..., Awaitable[Any]],
    takes_sim: bool,
    sink: IO[bytes] | None,
) -> RunResult:
    seed, strategy = config.seed, config.strategy
    sim = Simulation(config, Trace(record=config.record, file=sink))
    box: list[Any] = []
    with Session(sim) as session:
        session.start(_root, sim, main, takes_sim, box)
        session.drive()
        liveness = session.interrupt_error()
        if liveness is not None:
            session.cancel_everything()
        failure = _failure(sim, session, liveness)
        sim.trace_event(
            "run.end",
            outcome="ok" if failure is None else failure.kind.name.lower(),
            rng=stream_digests(sim),
        )
        return RunResult(
            seed=seed,
            trace_hash=sim.trace.hexdigest(),
            virtual_time=sim.now(),
            events=sim.trace.count,
            failure=failure,
            strategy=strategy,
            faults=sim.fault_list,
            faults_fired=dict(sorted(sim.faults.fired.items())),
            buggify_fired=dict(sorted(sim.buggify.fired.items())),
            redirected=tuple(sim.guards.redirected()),
            guards=sim.guards.policy,
            value=box[0] if box else None,
            wall_seconds=session.wall_seconds(),
            steps=sim.strategy.steps,
        )


async def _root(
    sim: Simulation, main: Callable[..., Awaitable[Any]], takes_sim: bool, box: list[Any]
) -> None:
    sim._token = trio.lowlevel.current_trio_token()
    with trio.CancelScope() as scope:
        sim._root_scope = scope
        async with trio.open_nursery() as nursery:
            sim._nursery = nursery
            sim._start_background()
            finished = trio.Event()

            async def main_node(node: Node) -> None:
                try:
                    box.append(await (main(sim) if takes_sim else main()))
                    # as the interpreter does at exit: wait for non-daemon threads
                    await sim.threads.process_exit(node)
                finally:
                    finished.set()

            sim.add_node(sim.main_node_name, main_node)
            await finished.wait()
            sim.cancel_all()


def _failure(sim: Simulation, session: Session, liveness: Exception | None) -> Failure | None:
    now = sim.now()
    if sim.guards.violations:
        # A strict-mode guard tripped, even if the program swallowed the exception.
        first = sim.guards.violations[0]
        details = ""
        error = _error_of(session)
        if error is not None:
            details = format_exception(error)
        return Failure(FailureKind.NONDETERMINISM, f"NondeterminismError: {first}", details, now)
    if liveness is not None:
        report = getattr(liveness, "report", "")
        return Failure(FailureKind.LIVENESS, str(liveness), report, now)
    error = _error_of(session)
    if error is None:
        return None
    kind, leaf = classify(error)
    if isinstance(leaf, NondeterminismError):
        kind = FailureKind.NONDETERMINISM
    message = f"{type(leaf).__name__}: {leaf}".rstrip(": ")
    return Failure(kind, message, format_exception(error), now)


def _error_of(session: Session) -> BaseException | None:
    result = session.host.outcome
    return result.error if isinstance(result, outcome.Error) else None
