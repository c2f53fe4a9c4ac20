"""The sandbox fault domain: SimSandbox on a node, with faults injected at the port.

``open_sandbox()`` gives the calling node (or ``node=``) a :class:`FaultySandbox`. Its work is
volatile: when the node crashes, its sandboxes crash with it (later calls raise
``SandboxStateError`` naming the crash), and calls made while the node is down raise
``NodeDownError``.

Faults (all probabilities default to zero; see docs/sandbox.md):

========================== ================================================================
``sandbox.boot_fail``       boot raises ``SandboxBootError``; the sandbox is stopped
``sandbox.crash``           an exec raises ``SandboxCrashedError``; the sandbox is stopped
``sandbox.exec_timeout``    an exec hangs, then raises ``ExecTimeoutError`` after its timeout
                            (virtual seconds); the sandbox keeps running
``sandbox.pause_fail``      pause raises ``PauseError``; the sandbox keeps running
``sandbox.snapshot_fail``   snapshot raises ``SnapshotError``; nothing changes
``sandbox.snapshot_corrupt`` the snapshot returned has one bit flipped; restoring it raises
                            ``CorruptSnapshotError`` and changes nothing
``sandbox.restore_fail``    restore raises ``RestoreError``; the working area is unchanged
========================== ================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from kelpie_agent.sandbox._errors import (
    PauseError,
    RestoreError,
    SandboxBootError,
    SnapshotError,
)
from kelpie_agent.sandbox._network import SandboxNetwork
from kelpie_agent.sandbox._port import SandboxLimits, SandboxState

from .._errors import UsageError
from .._faults import FaultSpec, register_fault
from .._public import current_simulation
from .._storms import StormSpec, register_storm
from ._sandbox import SimSandbox, SimTimings

if TYPE_CHECKING:
    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["FaultySandbox", "open_sandbox"]

_R = register_fault
BOOT_FAIL = _R(
    FaultSpec(
        "sandbox.boot_fail",
        "booting a sandbox fails",
        swarm_range=(0.0, 0.1),
        observed="boot raises SandboxBootError after the boot time; the sandbox is stopped",
    )
)
CRASH = _R(
    FaultSpec(
        "sandbox.crash",
        "the sandbox crashes during an exec",
        swarm_range=(0.0, 0.05),
        observed="the exec raises SandboxCrashedError; the sandbox is stopped, and later calls "
        "raise SandboxStateError naming the crash",
    )
)
EXEC_TIMEOUT = _R(
    FaultSpec(
        "sandbox.exec_timeout",
        "an exec hangs until its timeout",
        swarm_range=(0.0, 0.1),
        observed="the exec raises ExecTimeoutError after its timeout in virtual seconds (pauses "
        "do not count); the command has no effect; the sandbox keeps running",
    )
)
PAUSE_FAIL = _R(
    FaultSpec(
        "sandbox.pause_fail",
        "pausing a sandbox fails",
        swarm_range=(0.0, 0.1),
        observed="pause raises PauseError; the sandbox keeps running",
    )
)
SNAPSHOT_FAIL = _R(
    FaultSpec(
        "sandbox.snapshot_fail",
        "taking a snapshot fails",
        swarm_range=(0.0, 0.1),
        observed="snapshot raises SnapshotError; the sandbox is unchanged",
    )
)
SNAPSHOT_CORRUPT = _R(
    FaultSpec(
        "sandbox.snapshot_corrupt",
        "a snapshot is handed back with one bit flipped",
        swarm_range=(0.0, 0.05),
        observed="snapshot succeeds; restoring those bytes raises CorruptSnapshotError (a "
        "RestoreError) and changes nothing",
    )
)
RESTORE_FAIL = _R(
    FaultSpec(
        "sandbox.restore_fail",
        "restoring a snapshot fails",
        swarm_range=(0.0, 0.1),
        observed="restore raises RestoreError; the working area is unchanged",
    )
)
STORM = register_storm(
    StormSpec(
        "sandbox",
        "sandboxes crash, hang, fail to boot, pause, snapshot and restore",
        (
            ("sandbox.crash", 0.5, ()),
            ("sandbox.exec_timeout", 0.3, ()),
            ("sandbox.boot_fail", 0.4, ()),
            ("sandbox.pause_fail", 0.3, ()),
            ("sandbox.snapshot_fail", 0.3, ()),
            ("sandbox.restore_fail", 0.3, ()),
        ),
        length=(2.0, 6.0),
    )
)
_RAISES = {
    "boot": (BOOT_FAIL, SandboxBootError),
    "pause": (PAUSE_FAIL, PauseError),
    "snapshot": (SNAPSHOT_FAIL, SnapshotError),
    "restore": (RESTORE_FAIL, RestoreError),
}


class FaultySandbox(SimSandbox):
    """A node's :class:`SimSandbox`, traced, with the sandbox faults."""

    def __init__(
        self,
        sim: Simulation,
        node: Node | None,
        name: str = "sandbox",
        limits: SandboxLimits | None = None,
        timings: SimTimings | None = None,
        **options: Any,
    ) -> None:
        super().__init__(limits, timings=timings, **options)
        self.sim = sim
        self.node = node
        self.name = name
        self._target = node.name if node is not None else None
        if node is not None:
            node.crash_hooks.append(self._on_node_crash)

    def __repr__(self) -> str:
        where = f" on {self._target}" if self._target else ""
        return f"<FaultySandbox {self.name!r}{where} {self.state.value}>"

    def _on_node_crash(self, node: Node) -> None:
        self._crash(f"its node {node.name!r} crashed")

    def _crash(self, reason: str) -> None:
        super()._crash(reason)
        self._forget_node()

    async def boot(self) -> None:
        try:
            await super().boot()
        finally:
            if self.state is SandboxState.STOPPED:
                self._forget_node()

    async def _before_op(self, op: str, **fields: Any) -> None:
        if self.node is not None:
            self.node.check_alive()
        self.sim.trace_event(f"sandbox.{op}", sandbox=self.name, **fields)
        faults = self.sim.faults
        if op in _RAISES:
            spec, error = _RAISES[op]
            if faults.fires(spec.name, node=self._target, sandbox=self.name):
                raise error(f"injected {spec.name}")
        elif op == "exec":
            if faults.fires(CRASH.name, node=self._target, sandbox=self.name):
                self._crash("injected sandbox.crash")
            elif faults.fires(EXEC_TIMEOUT.name, node=self._target, sandbox=self.name):
                await trio.sleep_forever()  # the command's own timeout ends it
        elif op == "stop":
            self._forget_node()
        await trio.lowlevel.checkpoint()

    def _after_snapshot(self, snapshot: bytes) -> bytes:
        if not self.sim.faults.fires(SNAPSHOT_CORRUPT.name, node=self._target, sandbox=self.name):
            return snapshot
        bit = self.sim.rng("sandbox/corrupt").randrange(len(snapshot) * 8)
        damaged = bytearray(snapshot)
        damaged[bit // 8] ^= 0x80 >> (bit % 8)
        return bytes(damaged)

    def _forget_node(self) -> None:
        """Once stopped, the node need not tell us about its crashes (nor keep us alive)."""
        if self.node is not None:
            hooks = self.node.crash_hooks  # replaced, not mutated: sim.crash may be iterating it
            self.node.crash_hooks = [h for h in hooks if h != self._on_node_crash]


def open_sandbox(
    node: Node | None = None,
    *,
    name: str = "sandbox",
    limits: SandboxLimits | None = None,
    timings: SimTimings | None = None,
    isolation: str = "namespaces",
    network: SandboxNetwork | None = None,
    bubblewrap: bool = True,
    services: Mapping[str, Callable[..., Any]] | None = None,
) -> FaultySandbox:
    """A simulated sandbox (not yet booted) for ``node`` (default: the calling task's node).
    ``isolation``, ``network`` and ``bubblewrap`` are :class:`SimSandbox`'s; ``services`` are
    simulated external services its Python code can call (as builtins)."""
    sim = node.sim if node is not None else current_simulation()
    if sim is None:
        raise UsageError("open_sandbox() needs a running simulation; use SimSandbox() outside one")
    return FaultySandbox(
        sim,
        node if node is not None else sim.current_node(),
        name,
        limits,
        timings,
        isolation=isolation,
        network=network,
        bubblewrap=bubblewrap,
        services=services,
    )
