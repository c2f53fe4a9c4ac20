"""Workloads and invariants: what a scenario runs, and what must hold when it is done.

A workload is an ``async def`` taking a :class:`WorkloadContext`, declared with
:func:`workload`, which names its parameters (with defaults, which also fix their types) and
which of them are *sizes* that ``kelpie-dst shrink`` may lower. An invariant is a function of
the context (sync or async) marked with :func:`invariant`; it raises ``AssertionError`` (or
returns a checker result whose ``ok`` is ``False``) when the property does not hold. A scenario
names its invariants; names resolve in the workload's module first, then among the built-ins
(:data:`BUILTIN_INVARIANTS`, backed by :mod:`kelpie_dst.checkers`).
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio

from .._errors import InvariantViolation
from ..checkers import HistoryRecorder, check_linearizability

if TYPE_CHECKING:
    from .._rng import RngStream
    from .._sim import Simulation
    from ._model import Scenario, Topology

__all__ = [
    "BUILTIN_INVARIANTS",
    "DEFAULT_LIMIT",
    "WorkloadContext",
    "WorkloadInfo",
    "invariant",
    "module_invariants",
    "workload",
    "workload_info",
]

F = TypeVar("F", bound=Callable[..., Any])
ParamValue = int | float | str | bool


DEFAULT_LIMIT = 1_000_000  # |value| of a numeric parameter whose bounds are not declared


@attrs.frozen
class WorkloadInfo:
    """What :func:`workload` declares: parameter defaults, the shrinkable sizes with their
    minimum values, and each numeric parameter's bounds (:meth:`bounds_of`)."""

    params: Mapping[str, ParamValue] = attrs.field(factory=dict, hash=False)
    sizes: Mapping[str, int] = attrs.field(factory=dict, hash=False)
    bounds: Mapping[str, tuple[float, float]] = attrs.field(factory=dict, hash=False)
    backends: tuple[str, ...] = ("sim",)  # the topology.storage.backend values it runs on

    def bounds_of(self, name: str) -> tuple[float, float] | None:
        """``(low, high)`` of a numeric parameter (inclusive): as declared, else a size's
        minimum up to DEFAULT_LIMIT, else plus or minus DEFAULT_LIMIT; ``None`` for strings
        and flags."""
        default = self.params.get(name)
        if isinstance(default, bool) or not isinstance(default, int | float):
            return None
        if name in self.bounds:
            return self.bounds[name]
        return (self.sizes.get(name, -DEFAULT_LIMIT), DEFAULT_LIMIT)


def workload(
    *,
    params: Mapping[str, ParamValue] | None = None,
    sizes: Iterable[str] | Mapping[str, int] = (),
    bounds: Mapping[str, tuple[float, float]] | None = None,
    backends: Iterable[str] = ("sim",),
) -> Callable[[F], F]:
    """Declare an ``async def fn(ctx)`` as a scenario workload.

    ``params`` maps each parameter to its default (its type is the default's type); ``sizes``
    names the integer parameters that measure the workload's size (clients, operations), which
    shrinking lowers, down to 1 or to the minimum given in a mapping; ``bounds`` gives numeric
    parameters their ``(low, high)`` range (inclusive), which the scenario loader enforces, so
    ``clients = 1000000000`` is a usage error instead of a run that eats all memory (without
    it: plus or minus DEFAULT_LIMIT); ``backends`` names the ``topology.storage.backend``
    values it runs on (a workload that builds SimKV over a store itself runs only on ``sim``),
    which the scenario loader enforces too.
    """
    defaults = dict(params or {})
    mins = dict(sizes) if isinstance(sizes, Mapping) else dict.fromkeys(sizes, 1)
    ranges = dict(bounds or {})
    for name, minimum in mins.items():
        default = defaults.get(name)
        if isinstance(default, bool) or not isinstance(default, int):
            raise TypeError(f"size {name!r} must be an integer parameter with a default")
        if minimum > default:
            raise TypeError(f"size {name!r} has a minimum {minimum} above its default {default}")
    for name, (low, high) in ranges.items():
        default = defaults.get(name)
        if isinstance(default, bool) or not isinstance(default, int | float):
            raise TypeError(f"bounds of {name!r}: only numeric parameters have bounds")
        if not low <= default <= high:
            raise TypeError(f"bounds of {name!r}: the default {default} is not within them")
        if name in mins and low < mins[name]:
            raise TypeError(f"bounds of {name!r}: below the size's minimum {mins[name]}")

    def mark(fn: F) -> F:
        info = WorkloadInfo(defaults, mins, ranges, tuple(backends))
        fn.__kelpie_workload__ = info  # type: ignore[attr-defined]
        return fn

    return mark


def workload_info(fn: Callable[..., Any]) -> WorkloadInfo | None:
    info = getattr(fn, "__kelpie_workload__", None)
    return info if isinstance(info, WorkloadInfo) else None


def invariant(fn: F | None = None, *, name: str | None = None) -> Any:
    """Mark ``fn(ctx)`` as an invariant that scenarios can name (``@invariant`` or
    ``@invariant(name="...")``)."""

    def mark(f: F) -> F:
        f.__kelpie_invariant__ = name or f.__name__  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


def module_invariants(module: types.ModuleType) -> dict[str, Callable[..., Any]]:
    """The invariants a workload module defines, by name."""
    found: dict[str, Callable[..., Any]] = {}
    for value in vars(module).values():
        name = getattr(value, "__kelpie_invariant__", None)
        if isinstance(name, str) and callable(value):
            found[name] = value
    return dict(sorted(found.items()))


class WorkloadContext:
    """What a workload and its invariants get: the simulation, the scenario, the parameters,
    a history recorder, metrics, and a scratch ``state`` dict shared with the invariants."""

    def __init__(self, sim: Simulation, scenario: Scenario) -> None:
        self.sim = sim
        self.scenario = scenario
        self.params: Mapping[str, Any] = types.MappingProxyType(dict(scenario.workload.params))
        self.topology: Topology = scenario.topology
        self.duration = scenario.duration
        self.history = HistoryRecorder()
        self.metrics: dict[str, float] = {}
        self.state: dict[str, Any] = {}
        self.healed = False

    @property
    def heal_at(self) -> float | None:
        """When every fault heals (the liveness phase starts), or ``None`` without one."""
        return self.scenario.heal_at

    @property
    def deadline(self) -> float:
        """The virtual time by which the workload must have returned."""
        return self.scenario.deadline

    def rng(self, name: str) -> RngStream:
        """A seeded stream for the workload's own choices (``workload/<name>``)."""
        return self.sim.rng(f"workload/{name}")

    def now(self) -> float:
        return trio.current_time()

    def metric(self, name: str, value: float) -> None:
        """Record a number in the run's results (shown in sweeps' JSON)."""
        self.metrics[name] = value

    def count(self, name: str, amount: float = 1) -> None:
        self.metrics[name] = self.metrics.get(name, 0) + amount


def _linearizability(ctx: WorkloadContext) -> None:
    """The recorded KV history (``ctx.history``) is linearizable."""
    history = ctx.history.history()
    result = check_linearizability(history)
    ctx.metric("history.operations", result.operations)
    if result.ok is None:
        ctx.metric("linearizability.undecided_keys", len(result.unknown_keys))
    if result.ok is False:
        raise InvariantViolation(result.describe())


BUILTIN_INVARIANTS: dict[str, Callable[[WorkloadContext], Any]] = {
    "linearizability": _linearizability,
}


async def check_invariant(name: str, fn: Callable[..., Any], ctx: WorkloadContext) -> None:
    """Run one invariant; a falsy checker result or an assertion fails the run (exit 1)."""
    try:
        outcome = fn(ctx)
        if isinstance(outcome, Awaitable):
            outcome = await outcome
    except InvariantViolation:
        raise
    except AssertionError as error:
        # Keep the user's exception and traceback; name the invariant in its message.
        error.args = (f"invariant {name} does not hold: {error}", *error.args[1:])
        raise
    ok = getattr(outcome, "ok", True)
    if ok is False:
        describe = getattr(outcome, "describe", None)
        raise InvariantViolation(f"invariant {name}: {describe() if describe else outcome}")
