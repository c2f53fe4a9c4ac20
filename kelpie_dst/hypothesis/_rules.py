"""Ready-made fault rules: mixins for a SimStateMachine, configured by class attributes.

List the mixins among the bases of your machine and name the nodes they act on::

    class Machine(CrashRules, PartitionRules, TimeRules, SimStateMachine):
        crash_nodes = ("kv",)
        partition_nodes = ("main", "kv")

Every fault decision (which node, which fault, how long) is a rule argument drawn by
Hypothesis, so the shrinker drops the faults that do not matter and simplifies the rest. The
rules are ``async``: they act inside a step, so their effects apply at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, cast

import hypothesis.strategies as st
import trio

from .._errors import UsageError
from .._faults import Fault, fault_types
from .._sim import MAIN_NODE, Simulation
from ._decorators import precondition, rule
from ._machine import SimStateMachine

__all__ = ["CrashRules", "FaultWindowRules", "PartitionRules", "TimeRules", "enable_fault"]

# Fault types injected by a background task that starts with the simulation (only when the type
# is configured then), or decided when a node first boots (clock.skew): a window opened later
# would never fire. What to use instead:
_NEMESIS_DRIVEN = {
    "process.crash": "CrashRules",
    "process.pause": "sim_options={'faults': [...]}",
    "network.partition": "PartitionRules",
    "network.clog": "sim_options={'faults': [...]}",
    "clock.jump": "sim_options={'faults': [...]}",
    "clock.skew": "sim_options={'faults': [...]}",
}


def _option(name: str, build: Callable[[Any], st.SearchStrategy[Any]] = st.sampled_from) -> Any:
    """A rule argument drawn from the machine's class attribute ``name``."""
    return st.runner().flatmap(lambda machine: build(getattr(machine, name)))


def _node_names(owner: str, attribute: str, names: Sequence[str], minimum: int) -> None:
    if isinstance(names, str) or len(names) < minimum or len(set(names)) != len(names):
        raise UsageError(
            f"{owner}.{attribute} must list at least {minimum} distinct node names, got {names!r}"
        )


class CrashRules(SimStateMachine):
    """``crash_node(node, restart_after)`` and ``restart_node(node)``.

    * ``crash_nodes``: the nodes that may crash (never the main node).
    * ``restart_delays``: the delays a crash may choose, in virtual seconds; ``None`` keeps the
      node down until ``restart_node`` restarts it.
    """

    crash_nodes: ClassVar[Sequence[str]] = ()
    restart_delays: ClassVar[Sequence[float | None]] = (0.0, 1.0, None)

    @classmethod
    def check_options(cls) -> None:
        super().check_options()
        _node_names(cls.__name__, "crash_nodes", cls.crash_nodes, 1)
        if MAIN_NODE in cls.crash_nodes:
            raise UsageError(f"{cls.__name__}.crash_nodes: the main node runs the steps")
        delays = tuple(cls.restart_delays)
        if not delays or any(d is not None and not d >= 0 for d in delays):
            raise UsageError(
                f"{cls.__name__}.restart_delays must be delays >= 0 or None, got {delays}"
            )

    def _down_for_good(self) -> dict[str, bool]:
        # Nodes crashed with restart_after=None (a dict: membership never depends on order).
        return cast(dict[str, bool], self.__dict__.setdefault("_kelpie_down_for_good", {}))

    def _any_crashable(self) -> bool:
        return any(self.sim.node(n).alive for n in self.crash_nodes)

    @precondition(lambda self: self._any_crashable())
    @rule(node=_option("crash_nodes"), restart_after=_option("restart_delays"))
    async def crash_node(self, node: str, restart_after: float | None) -> None:
        target = self.sim.node(node)
        if not target.alive:
            return
        self.sim.crash(target)
        if restart_after is None:
            self._down_for_good()[node] = True
        else:
            self.sim.restart(target, after=restart_after)

    @precondition(lambda self: bool(self._down_for_good()))
    @rule(node=_option("crash_nodes"))
    async def restart_node(self, node: str) -> None:
        if self._down_for_good().pop(node, False):
            self.sim.restart(self.sim.node(node))


def _sides(names: Sequence[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(names), min_size=1, max_size=len(names) - 1, unique=True)


class PartitionRules(SimStateMachine):
    """``partition(side, one_way)`` and ``heal_network()``.

    ``partition`` cuts the nodes in ``side`` off from the rest of ``partition_nodes`` (both
    ways, or only traffic leaving ``side`` with ``one_way``). Partitions add up until
    ``heal_network`` removes them all, and any clogs.
    """

    partition_nodes: ClassVar[Sequence[str]] = ()

    @classmethod
    def check_options(cls) -> None:
        super().check_options()
        _node_names(cls.__name__, "partition_nodes", cls.partition_nodes, 2)

    @rule(side=_option("partition_nodes", _sides), one_way=st.booleans())
    async def partition(self, side: list[str], one_way: bool) -> None:
        rest = [n for n in self.partition_nodes if n not in side]
        self.sim.network.partition(sorted(side), rest, one_way=one_way)

    # No precondition, although healing a healed network does nothing: this is the simplest
    # rule (no arguments sorts first), and when the simplest rule may be disabled Hypothesis
    # pays extra choices to skip it, which stops the shrinker from deleting the steps it
    # shrank to the next simplest rule (tests/hypothesis/test_rules.py).
    @rule()
    async def heal_network(self) -> None:
        self.sim.network.heal()


def enable_fault(sim: Simulation, fault: Fault) -> None:
    """Switch ``fault`` on in a running simulation, for its window ``[start, end)``.

    For fault types decided where the I/O happens (``storage.*``, ``network.delay``,
    ``llm.*``, ...); types set up when the simulation starts (``process.crash``,
    ``network.partition``, ``clock.*``, ...) raise :class:`UsageError`. No effect after
    ``sim.heal()``.
    """
    check_window_type(fault.type)
    sim.faults.enable(fault)


def check_window_type(name: str) -> None:
    if name not in fault_types():
        raise UsageError(f"unknown fault type {name!r} (known: {', '.join(fault_types())})")
    if name in _NEMESIS_DRIVEN:
        raise UsageError(
            f"{name} is set up when the simulation starts, not where the I/O happens, so it "
            f"cannot be switched on for a window; use {_NEMESIS_DRIVEN[name]}"
        )


class FaultWindowRules(SimStateMachine):
    """``fault_window(fault, probability, duration)``: switch a fault type on for a while.

    * ``fault_window_types``: the types to choose from (``storage.write_fail``, ...).
    * ``fault_window_nodes``: limit the faults to these nodes (default: all).
    * ``fault_window_probabilities``, ``fault_window_durations`` (virtual seconds): the choices.
    """

    fault_window_types: ClassVar[Sequence[str]] = ()
    fault_window_nodes: ClassVar[Sequence[str]] = ()
    fault_window_probabilities: ClassVar[Sequence[float]] = (1.0, 0.5, 0.1)
    fault_window_durations: ClassVar[Sequence[float]] = (1.0, 0.1, 10.0)

    @classmethod
    def check_options(cls) -> None:
        super().check_options()
        if isinstance(cls.fault_window_types, str) or not cls.fault_window_types:
            raise UsageError(f"{cls.__name__}.fault_window_types must list fault types")
        for name in cls.fault_window_types:
            check_window_type(name)
        for probability in cls.fault_window_probabilities:
            Fault(cls.fault_window_types[0], probability)  # checks the probability
        durations = tuple(cls.fault_window_durations)
        if not durations or any(not d > 0 for d in durations):
            raise UsageError(f"{cls.__name__}.fault_window_durations must be > 0, got {durations}")

    @rule(
        fault=_option("fault_window_types"),
        probability=_option("fault_window_probabilities"),
        duration=_option("fault_window_durations"),
    )
    async def fault_window(self, fault: str, probability: float, duration: float) -> None:
        now = self.sim.now()
        window = Fault(fault, probability, now, now + duration, tuple(self.fault_window_nodes))
        enable_fault(self.sim, window)


class TimeRules(SimStateMachine):
    """``advance_time(seconds)``: let virtual time pass while everything else runs, so timeouts
    expire, crashed nodes restart and fault windows close. ``time_steps``: the choices."""

    time_steps: ClassVar[Sequence[float]] = (0.01, 1.0, 10.0)

    @classmethod
    def check_options(cls) -> None:
        super().check_options()
        steps = tuple(cls.time_steps)
        if not steps or any(not (s > 0 and math.isfinite(s)) for s in steps):
            raise UsageError(f"{cls.__name__}.time_steps must be finite and > 0, got {steps}")

    @rule(seconds=_option("time_steps"))
    async def advance_time(self, seconds: float) -> None:
        await trio.sleep(seconds)
