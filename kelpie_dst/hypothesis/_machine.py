"""SimStateMachine: a Hypothesis rule-based state machine whose rules run inside a simulation.

Each example (one run of the machine) gets its own simulation, opened on first use with a seed
that Hypothesis draws, and closed by :meth:`SimStateMachine.teardown`. Rules, initialize rules,
invariants and preconditions may be ``async def``: each call becomes one step of the
simulation (:meth:`kelpie_dst.SimulationHandle.step`), run as a task on the main node while the
rest of the simulated world runs around it. Virtual time never moves between steps.

The seed is drawn through Hypothesis (not fixed), so different examples explore different
schedules, latencies and fault draws, and shrinking simplifies the seed along with the steps.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import inspect
import os
import unittest
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, TypeVar

import hypothesis.strategies as st
from hypothesis import currently_in_test_context, note
from hypothesis.control import cleanup, current_build_context
from hypothesis.stateful import (
    INITIALIZE_RULE_MARKER,
    INVARIANT_MARKER,
    RULE_MARKER,
    RuleBasedStateMachine,
)

from .._errors import DstError, UsageError
from .._sim import Simulation
from .._stepping import SimulationHandle, open_simulation
from ._replay import replay_note

__all__ = ["SimStateMachine"]

T = TypeVar("T")
_MARKERS = (RULE_MARKER, INITIALIZE_RULE_MARKER, INVARIANT_MARKER)
# The handle opened by the last machine in this thread, so that one whose example never reached
# teardown (its own __init__ raised) cannot block the next example.
_LAST_OPEN: list[SimulationHandle | None] = [None]
_CHECKED: set[type] = set()  # classes whose check_options() passed


class _TestCaseProperty:
    """``Machine.TestCase``: a unittest class that runs the machine with kelpie's profiles."""

    def __get__(
        self, obj: SimStateMachine | None, owner: type[SimStateMachine]
    ) -> type[unittest.TestCase]:
        from ._run import test_case_for

        return test_case_for(owner if obj is None else type(obj))


class SimStateMachine(RuleBasedStateMachine):
    """Base class for stateful tests that drive a simulated system.

    Override :meth:`setup` to create nodes and start services, write rules as ``async def``
    (they run inside the simulation) or plain ``def`` (they run on the host, between steps),
    and add ready-made fault rules from :mod:`kelpie_dst.hypothesis` as mixins.

    Class attributes:

    * ``sim_options``: keyword arguments for :func:`kelpie_dst.open_simulation` (``strategy``,
      ``faults``, ``guards``, ``max_time``, ...), except ``seed``.
    * ``seeds``: the strategy the simulation seed is drawn from.
    """

    sim_options: ClassVar[Mapping[str, Any]] = {}
    seeds: ClassVar[st.SearchStrategy[int]] = st.integers(0, 2**32 - 1)
    TestCase = _TestCaseProperty()  # type: ignore[assignment]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _wrap_async_members(cls)

    @classmethod
    def check_options(cls) -> None:
        """Validate the class's configuration (mixins check theirs; call ``super()``)."""
        if "seed" in cls.sim_options:
            raise UsageError(f"{cls.__name__}.sim_options must not set 'seed': Hypothesis draws it")
        allowed = set(inspect.signature(open_simulation).parameters) - {"seed"}
        unknown = sorted(set(cls.sim_options) - allowed)
        if unknown:
            raise UsageError(
                f"{cls.__name__}.sim_options: unknown option {unknown[0]!r} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        if cls not in _CHECKED:
            cls.check_options()
            _CHECKED.add(cls)
        self.sim_seed = _draw_seed(self.seeds)
        self._handle: SimulationHandle | None = None
        self.rule_steps = 0
        self.final_trace_hash: str | None = None

    # -- the simulation ------------------------------------------------------------------------
    async def setup(self) -> None:
        """Called once per example, inside the simulation, before the first step."""

    @property
    def handle(self) -> SimulationHandle:
        """This example's simulation handle, opened (and :meth:`setup` run) on first use."""
        if self._handle is None:
            self._open()
        assert self._handle is not None
        return self._handle

    @property
    def sim(self) -> Simulation:
        """This example's :class:`~kelpie_dst.Simulation`."""
        return self.handle.sim

    def step(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` as one step, from a plain ``def`` rule."""
        return self.handle.step(fn, *args)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass (one step)."""
        self.handle.advance(seconds)

    def settle(self) -> None:
        """Run everything that can run now, without moving virtual time (one step)."""
        self.handle.settle()

    def _open(self) -> None:
        _close_leftover()
        # Collect the garbage of earlier examples now, on the host: collected inside this
        # simulation, its finalizers could run at points that differ between replays. Earlier
        # simulations ran with the collector off, so their garbage is young; generations 0-1
        # cost ~0.3 ms here, a full collection ~40 ms with Hypothesis loaded.
        gc.collect(1)
        options = dict(self.sim_options)
        handle = open_simulation(seed=self.sim_seed, **options)
        self._handle = handle
        _LAST_OPEN[0] = handle
        if currently_in_test_context():
            cleanup(handle.close)  # in case a subclass's teardown forgets super().teardown()

        async def setup() -> None:
            handle.sim.trace_event("hypothesis.setup", machine=type(self).__name__)
            await self.setup()

        handle.step(setup)

    def _run_step(
        self, kind: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        __tracebackhide__ = True
        handle = self.handle
        if handle.closed:
            raise DstError("this example's simulation has ended; no further steps can run")
        if kind in ("rule", "initialize"):
            self.rule_steps += 1
        name = fn.__name__

        async def body() -> Any:
            __tracebackhide__ = True
            handle.sim.trace_event(f"hypothesis.{kind}", name=name, args=kwargs)
            return await fn(self, *args, **kwargs)

        return handle.step(body)

    def teardown(self) -> None:
        """Close this example's simulation. Subclasses that override it must call it."""
        handle = self._handle
        if handle is None:
            return
        try:
            self.final_trace_hash = handle.trace_hash
            if currently_in_test_context() and current_build_context().is_final:
                note(
                    f"kelpie_dst: simulation seed={self.sim_seed} "
                    f"strategy={handle.sim.config.strategy} rule_steps={self.rule_steps} "
                    f"virtual_time={handle.time:.6f} trace_hash={self.final_trace_hash}"
                )
                note(replay_note(type(self)))
        finally:
            handle.close()
            if _LAST_OPEN[0] is handle:
                _LAST_OPEN[0] = None


def _draw_seed(seeds: st.SearchStrategy[int]) -> int:
    if currently_in_test_context():
        return int(current_build_context().data.draw(seeds))
    # Outside Hypothesis (a printed example pasted into a script): DST_SEED, else 0.
    text = os.environ.get("DST_SEED", "0")
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"DST_SEED must be an integer, got {text!r}") from None


def _close_leftover() -> None:
    handle = _LAST_OPEN[0]
    _LAST_OPEN[0] = None
    if handle is not None:
        handle.close()


# -- turning async members into steps ------------------------------------------------------------
def _wrap_async_members(cls: type[SimStateMachine]) -> None:
    """Give ``cls`` synchronous versions of its (and its mixins') rules and invariants, each
    running the original as one simulation step. Sync ones are wrapped too, to count steps."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        for name, member in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            replacement = _wrapped(member)
            if replacement is not None:
                setattr(cls, name, replacement)


def _wrapped(member: Any) -> Callable[..., Any] | None:
    if getattr(member, "_kelpie_wrapped", False):
        return None
    for marker in _MARKERS:
        spec = getattr(member, marker, None)
        if spec is None:
            continue
        kind = {RULE_MARKER: "rule", INITIALIZE_RULE_MARKER: "initialize"}.get(marker, "invariant")
        function = _as_step(spec.function, kind)
        preconditions = tuple(_as_step(p, "precondition") for p in spec.preconditions)
        if function is spec.function and preconditions == tuple(spec.preconditions):
            return None  # a sync invariant with sync preconditions: nothing to do
        new_spec = dataclasses.replace(spec, function=function, preconditions=preconditions)
        setattr(function, marker, new_spec)
        return function
    return None


def _as_step(fn: Callable[..., Any], kind: str) -> Callable[..., Any]:
    if getattr(fn, "_kelpie_wrapped", False):
        return fn
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        def step(self: SimStateMachine, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return self._run_step(kind, fn, args, kwargs)

    elif kind in ("rule", "initialize"):

        @functools.wraps(fn)
        def step(self: SimStateMachine, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            self.rule_steps += 1
            return fn(self, *args, **kwargs)

    else:
        return fn
    step._kelpie_wrapped = True  # type: ignore[attr-defined]
    return step
