"""The Simulation: one seeded world of nodes, clock, faults and trace, handed to programs.

Code under test never needs it: plain trio code runs unchanged. Workloads and shims use it to
create nodes, inject faults, draw from named streams and log to the trace.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs
import trio

from ._buggify import Buggify, check_hazards
from ._clock import DEFAULT_LIVELOCK_STEPS, VirtualClock
from ._errors import UsageError
from ._faults import Fault, FaultInjector, FaultPlan
from ._guards import POLICIES, Guards
from ._nodes import NODE, Node, NodeState, in_trio_task
from ._rng import RngStream, derive_seed
from ._sched import STRATEGIES
from ._trace import Trace
from ._wallclock import JUMP, NodeClock, clock_nemesis
from .net import SimNetwork
from .threads._runtime import ThreadRuntime
from .threads._watchdog import DEFAULT_WATCHDOG

__all__ = ["DEFAULT_EPOCH", "SimConfig", "Simulation", "make_config"]

# 2026-01-01T00:00:00Z: wall-clock timestamps in a simulation start here unless configured.
DEFAULT_EPOCH = 1_767_225_600.0
MAIN_NODE = "main"


def _check_strategy(_: object, __: object, value: str) -> None:
    if value not in STRATEGIES:
        raise UsageError(f"unknown strategy {value!r} (choose from {', '.join(STRATEGIES)})")


def _check_guards(_: object, __: object, value: str) -> None:
    if value not in POLICIES:
        raise UsageError(f"unknown guard policy {value!r} (choose from {', '.join(POLICIES)})")


@attrs.frozen
class SimConfig:
    """Everything that, with the seed, determines a run."""

    seed: int = 0
    strategy: str = attrs.field(default="random", validator=_check_strategy)
    pct_depth: int = 3
    # PCT: the program's length in task steps (None: no estimate; see _pct.py)
    pct_horizon: int | None = None
    guards: str = attrs.field(default="redirect", validator=_check_guards)
    guard_allow: tuple[str, ...] = ()
    faults: FaultPlan = attrs.field(factory=FaultPlan)
    max_time: float = math.inf
    epoch: float = DEFAULT_EPOCH
    buggify: bool = True
    # dormant BUGGIFY sites this run arms (_buggify.DORMANT_SITES)
    hazards: tuple[str, ...] = ()
    record: bool = False
    gc_every: int = 4096
    # seconds of real time a call may block outside the model before the run fails (exit 2)
    watchdog: float = DEFAULT_WATCHDOG
    preemption: bool = True  # seeded preemption points inside simulated threads
    # task steps at one virtual instant before the run fails as a livelock (0: never)
    livelock_steps: int = DEFAULT_LIVELOCK_STEPS


def make_config(
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
    pct_horizon: int | None = None,
    watchdog: float = DEFAULT_WATCHDOG,
    preemption: bool = True,
    livelock_steps: int = DEFAULT_LIVELOCK_STEPS,
) -> SimConfig:
    """A :class:`SimConfig` from the keyword options shared by ``run`` and ``open_simulation``."""
    plan = FaultPlan(
        tuple(f if isinstance(f, Fault) else Fault.parse(f) for f in faults), swarm=swarm
    )
    if max_time is not None and not max_time > 0:
        raise UsageError(f"max_time must be a positive number of seconds, got {max_time!r}")
    if isinstance(watchdog, bool) or not isinstance(watchdog, int | float) or not watchdog > 0:
        raise UsageError(f"watchdog must be a positive number of seconds, got {watchdog!r}")
    steps = livelock_steps
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise UsageError(
            f"livelock_steps must be a whole number of task steps (0: off), got {livelock_steps!r}"
        )
    return SimConfig(
        seed=seed,
        strategy=strategy,
        pct_depth=pct_depth,
        guards=guards,
        guard_allow=tuple(guard_allow),
        faults=plan,
        max_time=math.inf if max_time is None else max_time,
        epoch=epoch,
        buggify=buggify,
        hazards=check_hazards(hazards),
        record=record,
        pct_horizon=pct_horizon,
        watchdog=float(watchdog),
        preemption=bool(preemption),
        livelock_steps=livelock_steps,
    )


class Simulation:
    """The world of one run. Obtain it as ``main``'s argument or from
    :func:`kelpie_dst.current_simulation`."""

    def __init__(self, config: SimConfig, trace: Trace | None = None) -> None:
        self.config = config
        self.seed = config.seed
        self._streams: dict[str, RngStream] = {}
        self.clock = VirtualClock(config.max_time, config.livelock_steps)
        self.trace = trace if trace is not None else Trace(record=config.record)
        self.nodes: list[Node] = []
        self._by_name: dict[str, Node] = {}
        self.main_node_name = MAIN_NODE
        self.fault_list: tuple[Fault, ...] = config.faults.resolve(config.seed)
        self.faults = FaultInjector(self, self.fault_list)
        self.buggify = Buggify(self, config.buggify, config.hazards)
        self.guards = Guards(self, config.guards, config.guard_allow)
        strategy_cls = STRATEGIES[config.strategy]
        sched_seed = derive_seed(config.seed, "scheduler")
        if config.strategy == "pct":
            self.strategy = strategy_cls(
                sched_seed,
                depth=config.pct_depth,  # type: ignore[call-arg]
                horizon=config.pct_horizon,
            )
        else:
            self.strategy = strategy_cls(sched_seed)
        self.strategy.clock = self.clock
        self.network = SimNetwork(self)
        self.threads = ThreadRuntime(self)
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._root_scope: trio.CancelScope | None = None

    # -- randomness, time, trace ------------------------------------------------------------
    def rng(self, name: str) -> RngStream:
        """The named stream (created on first use); stable when other streams are added."""
        stream = self._streams.get(name)
        if stream is None:
            stream = self._streams[name] = RngStream(self.seed, name)
        return stream

    def now(self) -> float:
        """Virtual monotonic time in seconds (what ``trio.current_time()`` returns)."""
        return self.clock.current_time()

    def wall_time(self, node: Node | None = None) -> float:
        """Wall-clock time on ``node`` (default: the calling task's node): the configured epoch
        plus virtual time, plus that node's clock skew and jumps."""
        node = node or NODE.get(None)
        if node is None:
            return self.config.epoch + self.clock.current_time()
        return node.clock.now()

    def trace_event(self, kind: str, **fields: Any) -> None:
        node = NODE.get(None)
        for key, value in fields.items():
            if isinstance(value, Node):
                fields[key] = value.name
        self.trace.emit(self.clock.current_time(), node.name if node else "-", kind, fields)

    def log(self, message: str, **fields: Any) -> None:
        """Record a user event in the trace (it counts towards the trace hash)."""
        self.trace_event("log", message=message, **fields)

    # -- nodes ---------------------------------------------------------------------------------
    def add_node(
        self,
        name: str,
        main: Callable[[Node], Awaitable[object]] | None = None,
        *,
        address: str | None = None,
    ) -> Node:
        """Create a node and boot it. ``main(node)`` is its program; without one the node just
        hosts tasks started with :meth:`Node.start_soon`."""
        if self._nursery is None or self._token is None:
            raise UsageError("nodes can only be added while the simulation is running")
        if name in self._by_name:
            raise UsageError(f"a node named {name!r} already exists")
        address = address or f"10.0.0.{len(self.nodes) + 1}"
        if address in self.network.hosts or address == "127.0.0.1":
            raise UsageError(f"address {address} is already taken")
        node = Node(self, name, address, main)
        node.state = NodeState.UP  # booting: tasks started on it wait for its nursery
        self.nodes.append(node)
        self._by_name[name] = node
        self.network.attach(node)
        node.clock = NodeClock(self, node)
        self._spawn(node._incarnation, name=f"kelpie_dst.node[{name}]")
        return node

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` now if inside a trio task of this run; from the host between steps,
        queue it to run first thing in the next step."""
        if in_trio_task():
            fn()
        else:
            assert self._token is not None
            self._token.run_sync_soon(fn)

    def _spawn(self, fn: Callable[..., Awaitable[object]], *args: Any, name: str) -> None:
        nursery = self._nursery
        assert nursery is not None
        self.call_soon(lambda: nursery.start_soon(fn, *args, name=name))

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise UsageError(f"no node named {name!r}") from None

    def current_node(self) -> Node | None:
        return NODE.get(None)

    def crash(self, node: Node) -> None:
        """Crash ``node`` now: cancel its tasks, run its crash hooks, refuse its I/O.

        Like every lifecycle call, from the host between steps it applies at the next step.
        """
        if node.name == self.main_node_name:
            raise UsageError("the main node cannot crash; run the system under test on other nodes")
        if not in_trio_task():
            self.call_soon(lambda: self.crash(node))
            return
        if not node.alive:
            return
        was_paused = node.paused
        node._pause_ended(self.clock.current_time())
        node.state = NodeState.DOWN
        self.trace_event("node.crash", node=node, incarnation=node.incarnation)
        if was_paused:
            self._release(node)
        for hook in node.crash_hooks:
            hook(node)
        if node._scope is not None:
            node._scope.cancel()

    def restart(self, node: Node, after: float = 0.0) -> None:
        """Boot ``node`` again after ``after`` virtual seconds, if it is down by then (and once
        its crashed incarnation has finished unwinding)."""
        self._spawn(self._restart_later, node, after, name="kelpie_dst.restart")

    async def _restart_later(self, node: Node, after: float) -> None:
        await trio.sleep(after)
        if node.state is NodeState.DOWN:
            # The crashed incarnation may still be unwinding (it always is right after the
            # crash): boot once it has ended, rather than not at all.
            await node._wait_unwound()
        if node.state is NodeState.DOWN and node._scope is None and not node._booting:
            node._booting = True  # a second restart due at the same moment must not boot twice
            self.trace_event("node.restart", node=node)
            self._spawn(node._incarnation, name=f"kelpie_dst.node[{node.name}]")

    def pause(self, node: Node) -> None:
        """Freeze ``node``: none of its tasks runs until :meth:`resume`."""
        if node.name == self.main_node_name:
            raise UsageError("the main node cannot be paused")
        if not in_trio_task():
            self.call_soon(lambda: self.pause(node))
            return
        if node.state is not NodeState.UP:
            return
        node.state = NodeState.PAUSED
        node._pause_began(self.clock.current_time())
        self.strategy.pausing = True
        self.trace_event("node.pause", node=node)

    def resume(self, node: Node, after: float | None = None) -> None:
        """Unfreeze ``node`` now, or ``after`` virtual seconds from now."""
        if after is not None:
            self._spawn(self._resume_later, node, after, name="kelpie_dst.resume")
            return
        if not in_trio_task():
            self.call_soon(lambda: self.resume(node))
            return
        if node.state is not NodeState.PAUSED:
            return
        node.state = NodeState.UP
        node._pause_ended(self.clock.current_time())
        self.trace_event("node.resume", node=node)
        self._release(node)

    async def _resume_later(self, node: Node, after: float) -> None:
        await trio.sleep(after)
        self.resume(node)

    def _release(self, node: Node) -> None:
        self.strategy.release(node)
        self.strategy.pausing = any(n.paused for n in self.nodes)

    # -- background ----------------------------------------------------------------------------
    def _start_background(self) -> None:
        from ._process_faults import CRASH, PAUSE, nemesis

        assert self._nursery is not None
        self.network.install()
        if self.faults.enabled(CRASH.name) or self.faults.enabled(PAUSE.name):
            self._nursery.start_soon(nemesis, self, name="kelpie_dst.nemesis")
        if self.faults.enabled(JUMP.name):
            self._nursery.start_soon(clock_nemesis, self, name="kelpie_dst.clock.nemesis")
        if self.network.nemesis_enabled():
            self._nursery.start_soon(self.network.nemesis, name="kelpie_dst.net.nemesis")

    def cancel_all(self) -> None:
        """End the run: release paused nodes (so their tasks can unwind), cancel everything."""
        for node in self.nodes:
            if node.paused:
                node.state = NodeState.UP
                self.trace_event("node.resume", node=node, reason="teardown")
        self.strategy.pausing = False
        for node in self.nodes:
            self.strategy.release(node)
        if self._root_scope is not None:
            self._root_scope.cancel()
            self.threads.recheck()  # parked threads learn that the run is ending

    def heal(self) -> None:
        """Start a liveness phase: switch every fault off, heal network partitions and clogs,
        and resume paused nodes. Crashed nodes come back through their scheduled restarts."""
        self.faults.heal()
        self.network.heal()
        for node in self.nodes:
            if node.paused:
                self.resume(node)
