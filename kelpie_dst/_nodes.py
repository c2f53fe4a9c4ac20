"""Simulated nodes: processes with their own tasks, address, durable and volatile state.

A node's tasks carry the node in a context variable (:data:`NODE`), which trio copies into every
task they spawn; ports and shims use it to know on whose behalf they act. Lifecycle:

* **crash**: the node's tasks are cancelled at once, crash hooks run (the network resets its
  connections), and :meth:`Node.check_alive` raises from then on, so ``finally`` blocks cannot
  write through the ports;
* **restart**: a new incarnation boots the node's main again, with ``durable`` kept and
  ``volatile`` emptied;
* **pause / resume**: the node freezes exactly (its runnable tasks are held back by the
  scheduler) and later continues where it was.
"""

from __future__ import annotations

import contextvars
import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from ._errors import NodeDownError

if TYPE_CHECKING:
    from ._sim import Simulation
    from ._wallclock import NodeClock

__all__ = ["NODE", "Node", "NodeState", "in_trio_task"]

NODE: contextvars.ContextVar[Node] = contextvars.ContextVar("kelpie_dst.node")


class NodeState(enum.Enum):
    UP = "up"
    PAUSED = "paused"
    DOWN = "down"  # crashed, possibly restarting
    STOPPED = "stopped"  # main returned


class Node:
    """A simulated process. Create nodes with :meth:`Simulation.add_node`."""

    def __init__(
        self,
        sim: Simulation,
        name: str,
        address: str,
        main: Callable[[Node], Awaitable[object]] | None,
    ) -> None:
        self.sim = sim
        self.name = name
        self.address = address
        self.main = main
        self.state = NodeState.DOWN
        self.incarnation = 0
        self.durable: dict[str, Any] = {}
        self.volatile: dict[str, Any] = {}
        self.crash_hooks: list[Callable[[Node], None]] = []
        self.clock: NodeClock  # the node's wall-clock port, set by Simulation.add_node
        self._scope: trio.CancelScope | None = None
        self._booting = False  # a restart has spawned an incarnation that has not started yet
        self._unwound: trio.Event | None = None  # set once the live incarnation has ended
        self._nursery: trio.Nursery | None = None
        self._pending: list[tuple[Callable[..., Awaitable[object]], tuple[Any, ...], str]] = []
        # When the node was frozen: (paused at, resumed or crashed at), in virtual seconds. For
        # checkers that must excuse what a frozen process does at the moment it thaws.
        self.pause_spans: list[tuple[float, float]] = []
        self._paused_at: float | None = None

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.state.value} incarnation={self.incarnation}>"

    def paused_between(self, start: float, end: float) -> bool:
        """Whether the node was paused at any moment of ``[start, end]`` (virtual seconds)."""
        if self._paused_at is not None and self._paused_at <= end:
            return True
        return any(a <= end and b >= start for a, b in self.pause_spans)

    def _pause_began(self, now: float) -> None:
        self._paused_at = now

    def _pause_ended(self, now: float) -> None:
        if self._paused_at is not None:
            self.pause_spans.append((self._paused_at, now))
            self._paused_at = None

    @property
    def alive(self) -> bool:
        return self.state in (NodeState.UP, NodeState.PAUSED)

    @property
    def paused(self) -> bool:
        return self.state is NodeState.PAUSED

    def check_alive(self) -> None:
        """Raise :class:`NodeDownError` unless the node is up. Ports call this before any I/O."""
        if not self.alive:
            raise NodeDownError(f"node {self.name!r} is {self.state.value}")

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: Any, name: str = "") -> None:
        """Spawn a task that belongs to this node (it dies when the node crashes).

        On a node that is still booting, or from the host between steps, the task starts as
        soon as the node's nursery is open.
        """
        if not self.alive:
            raise NodeDownError(f"cannot spawn on node {self.name!r}: it is {self.state.value}")
        name = name or _task_name(fn)
        if self._nursery is None or not in_trio_task():
            self._pending.append((fn, args, name))
            if self._nursery is not None:
                self.sim.call_soon(self._start_pending)
            return
        self._nursery.start_soon(_in_node, self, fn, args, name=name)

    def _start_pending(self) -> None:
        pending, self._pending = self._pending, []
        if self._nursery is None or not self.alive:
            return
        for fn, args, name in pending:
            self._nursery.start_soon(_in_node, self, fn, args, name=name)

    async def _incarnation(self) -> None:
        """One life of the node: boot, run main, end on crash (cancel) or when main returns.

        Errors that escape the node's tasks after it crashed (a ``finally`` block that tried
        I/O and got :class:`NodeDownError`, say) die with the node: a killed process raises
        nothing. They are traced as ``node.absorbed``, not propagated to the simulation.
        """
        NODE.set(self)
        self._booting = False
        self.incarnation += 1
        incarnation = self.incarnation
        self.volatile = {}
        self.state = NodeState.UP
        self.sim.trace_event("node.start", node=self, incarnation=incarnation)
        unwound = self._unwound = trio.Event()
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self._start_pending()
                    if self.main is not None:
                        await self.main(self)
                        await self.sim.threads.process_exit(self)  # non-daemon threads
                        if self.alive:
                            self.state = NodeState.STOPPED
                            self.sim.trace_event("node.stop", node=self)
                            nursery.cancel_scope.cancel()
                    else:
                        await trio.sleep_forever()
        except* Exception as group:
            if self.state is not NodeState.DOWN or self.incarnation != incarnation:
                raise
            errors = sorted({type(e).__name__ for e in _leaves(group)})
            self.sim.trace_event("node.absorbed", node=self, errors=errors)
        finally:
            self._nursery = None
            self._scope = None
            unwound.set()

    async def _wait_unwound(self) -> None:
        """Return once the last incarnation has ended: after a crash its tasks take a few
        scheduling rounds (and any shielded cleanup its virtual time) to unwind."""
        if self._scope is not None and self._unwound is not None:
            await self._unwound.wait()


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def _in_node(node: Node, fn: Callable[..., Awaitable[object]], args: tuple[Any, ...]) -> None:
    NODE.set(node)
    await fn(*args)


def in_trio_task() -> bool:
    """True inside a trio task; False on the host between steps (or outside any run)."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


def _task_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__name__)}"
