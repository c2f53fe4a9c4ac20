"""Running one seed of a scenario: faults (explicit and swarm), the workload, the liveness
phase, and the invariants.

The run is an ordinary :func:`kelpie_dst.run` whose ``main`` builds a :class:`WorkloadContext`,
starts a task that heals every fault at the liveness phase's ``heal_at``, awaits the workload,
and then checks the invariants. The virtual time limit is the scenario's deadline, so a
workload that has not returned by then is a liveness failure with the blocked-tasks report.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import IO, Any

import attrs
import trio

from .._entry import format_duration
from .._errors import FailureKind
from .._faults import Fault
from .._result import RunResult
from .._run import run
from .._sim import Simulation
from ._model import Scenario
from ._token import ReplayToken, current_hashseed
from ._workload import WorkloadContext, check_invariant

__all__ = ["ScenarioRun", "describe_faults", "run_scenario"]


@attrs.frozen
class ScenarioRun:
    """One seed of a scenario: the run's result, the fault profile it used, its metrics."""

    scenario: Scenario
    seed: int
    result: RunResult
    explicit_faults: tuple[Fault, ...] = ()
    swarm_faults: tuple[Fault, ...] = ()
    metrics: Mapping[str, float] = attrs.field(factory=dict, hash=False)
    hashseed: str | None = "0"

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    def token(self) -> ReplayToken | None:
        """The replay token, or ``None`` when the hash seed was random (see
        :func:`~kelpie_dst.scenario.current_hashseed`): such a run may not replay."""
        if self.hashseed is None:
            return None
        return ReplayToken(
            self.scenario.ref,
            self.seed,
            self.scenario.overrides,
            self.result.trace_hash,
            self.hashseed,
        )

    def replay_line(self) -> str:
        token = self.token()
        if token is None:
            return (
                "replay: unavailable: this process runs under a random PYTHONHASHSEED, so the "
                "run may not replay; set PYTHONHASHSEED (or unset KELPIE_DST_NO_REEXEC)"
            )
        return token.replay_line()


def describe_faults(explicit: tuple[Fault, ...], swarm: tuple[Fault, ...]) -> str:
    """``faults: a=0.1, b=0.2; swarm chose: c=0.0123`` (or ``faults: none``)."""
    parts = []
    if explicit:
        parts.append(", ".join(f.describe() for f in explicit))
    if swarm:
        parts.append("swarm chose: " + ", ".join(f.describe() for f in swarm))
    return "faults: " + ("; ".join(parts) if parts else "none")


def run_scenario(
    scenario: Scenario,
    seed: int,
    *,
    record: bool = False,
    trace_file: IO[bytes] | str | os.PathLike[str] | None = None,
) -> ScenarioRun:
    """Run ``seed`` of ``scenario``; failures are reported in the result, never raised."""
    explicit, swarm = scenario.resolve_faults(seed)
    contexts: list[WorkloadContext] = []
    storage = scenario.topology.storage
    files = None
    if storage.backend == "sqlite":
        # imported here: a sweep's fresh-process recheck imports this module before it sets
        # sys.path, and the shims import kelpie_agent (a mutant's overlay must win)
        from ..shims._sqlite_disk import SqliteFiles

        files = SqliteFiles(fsync=storage.fsync)

    async def main(sim: Simulation) -> None:
        if files is not None:
            files.attach(sim)
        ctx = WorkloadContext(sim, scenario)
        contexts.append(ctx)
        await _drive(ctx)
        if files is not None:
            for name, value in files.metrics().items():
                ctx.metric(name, value)

    if scenario.topology.llm.transport == "anthropic_api":
        _import_anthropic_sdk()
    try:
        result = _run(main, scenario, seed, record, trace_file)
    finally:
        if files is not None:
            files.close()
    result = _explain_time_limit(scenario, result)
    metrics = dict(sorted(contexts[0].metrics.items())) if contexts else {}
    return ScenarioRun(scenario, seed, result, explicit, swarm, metrics, current_hashseed())


def _run(
    main: Callable[[Simulation], Awaitable[None]],
    scenario: Scenario,
    seed: int,
    record: bool,
    trace_file: IO[bytes] | str | os.PathLike[str] | None,
) -> RunResult:
    options = scenario.simulation
    return run(
        main,
        seed=seed,
        strategy=options.strategy,
        pct_depth=options.pct_depth,
        guards=options.guards,
        guard_allow=options.guard_allow,
        buggify=options.buggify,
        hazards=options.hazards,
        watchdog=options.watchdog,
        preemption=options.preemption,
        livelock_steps=options.livelock_steps,
        faults=scenario.faults_for(seed),
        swarm=False,
        max_time=scenario.deadline,
        record=record,
        trace_file=trace_file,
    )


def _import_anthropic_sdk() -> None:
    """Import the anthropic SDK (and the adapter on it) before the run, outside the guards:
    its pydantic models resolve ``datetime`` when they are built, and inside a strict run
    that name is the simulation's (a schema error), and the first import of a module must
    not depend on whether an earlier run in this process imported it."""
    import kelpie_agent.llm._anthropic  # noqa: F401


async def _drive(ctx: WorkloadContext) -> None:
    scenario = ctx.scenario
    async with trio.open_nursery() as nursery:
        if scenario.heal_at is not None:
            nursery.start_soon(_heal, ctx, scenario.heal_at, name="kelpie_dst.scenario.heal")
        await _call_workload(ctx)
        nursery.cancel_scope.cancel()
    for name, fn in scenario.invariants:
        await check_invariant(name, fn, ctx)


async def _heal(ctx: WorkloadContext, at: float) -> None:
    await trio.sleep_until(at)
    ctx.healed = True
    ctx.sim.heal()


async def _call_workload(ctx: WorkloadContext) -> None:
    spec = ctx.scenario.workload
    fn: Any = spec.fn
    if spec.info is not None:
        await fn(ctx)
        return
    required = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    await (fn(ctx.sim) if required else fn())


def _explain_time_limit(scenario: Scenario, result: RunResult) -> RunResult:
    """Name the deadline a workload missed, instead of the bare virtual time limit."""
    failure = result.failure
    if failure is None or failure.kind is not FailureKind.LIVENESS:
        return result
    if not failure.message.startswith("virtual time limit"):
        return result
    if scenario.liveness is not None:
        heal_at = scenario.heal_at
        assert heal_at is not None
        message = (
            f"liveness: the workload did not finish within "
            f"{format_duration(scenario.liveness.within)} after every fault healed at "
            f"t={format_duration(heal_at)}"
        )
    else:
        message = (
            f"the workload did not finish within the scenario's duration of "
            f"{format_duration(scenario.duration)}"
        )
    return attrs.evolve(result, failure=attrs.evolve(failure, message=message))
