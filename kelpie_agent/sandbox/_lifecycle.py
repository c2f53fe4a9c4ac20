"""The sandbox state machine, shared by every implementation.

One :class:`Lifecycle` per sandbox holds the state, the reason of a crash, and the cancel scopes
of the commands in flight, so that every implementation refuses the same illegal transitions
with the same message, cancels its commands on stop or crash the same way, and stops a paused
command's timeout from counting (pause parks each running command's deadline; resume gives it
back the time it had left).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from ._errors import (
    SandboxBootError,
    SandboxCrashedError,
    SandboxIsolationError,
    SandboxStateError,
)
from ._port import SandboxState

__all__ = ["LEGAL", "Lifecycle"]

_CREATED, _BOOTING, _RUNNING, _PAUSED, _STOPPED = SandboxState
_ORDER = list(SandboxState)

LEGAL: dict[str, frozenset[SandboxState]] = {
    "boot": frozenset({_CREATED}),
    "exec": frozenset({_RUNNING}),
    "read_file": frozenset({_RUNNING}),
    "write_file": frozenset({_RUNNING}),
    "list_files": frozenset({_RUNNING}),
    "pause": frozenset({_RUNNING}),
    "resume": frozenset({_PAUSED}),
    "snapshot": frozenset({_RUNNING, _PAUSED}),
    "restore": frozenset({_RUNNING, _PAUSED}),
}


class _Command:
    """A command's cancel scope; while the sandbox is paused its deadline is parked at infinity
    and the time it had left is kept, so a paused command never times out."""

    def __init__(self, scope: trio.CancelScope, timeout: float) -> None:
        self.scope = scope
        self.left = timeout
        self.thaw()

    def freeze(self) -> None:
        if not math.isinf(self.scope.deadline):
            self.left = max(self.scope.deadline - trio.current_time(), 0.0)
            self.scope.deadline = math.inf

    def thaw(self) -> None:
        self.scope.deadline = trio.current_time() + self.left


class Lifecycle:
    """State, crash reason and in-flight commands of one sandbox."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "ProcessSandbox", "SimSandbox": for messages
        self.state = _CREATED
        self.crash_reason: str | None = None
        self._execs: dict[int, _Command] = {}
        self._ids = itertools.count()
        self._unpaused = trio.Event()
        self._unpaused.set()

    # -- checks ------------------------------------------------------------------------------

    def require(self, operation: str) -> None:
        """Raise ``SandboxStateError`` unless ``operation`` is legal now."""
        legal = LEGAL[operation]
        if self.state in legal:
            return
        needs = " or ".join(s.value for s in _ORDER if s in legal)
        why = f" (it crashed: {self.crash_reason})" if self.crash_reason else ""
        raise SandboxStateError(
            f"cannot {operation}: the {self.kind} is {self.state.value}{why}; "
            f"{operation} needs it {needs}",
            operation=operation,
            state=self.state.value,
        )

    def require_idle(self, operation: str) -> None:
        """Raise ``SandboxStateError`` while commands are running."""
        if self._execs:
            raise SandboxStateError(
                f"cannot {operation} while {len(self._execs)} command(s) run in the {self.kind}",
                operation=operation,
                state=self.state.value,
            )

    def check_alive(self, operation: str) -> None:
        """After an await: raise if the sandbox was stopped or crashed meanwhile."""
        if self.state is not _STOPPED:
            return
        if self.crash_reason is not None:
            raise SandboxCrashedError(
                f"the {self.kind} crashed during {operation}: {self.crash_reason}"
            )
        raise SandboxStateError(
            f"the {self.kind} was stopped during {operation}", operation=operation, state="stopped"
        )

    @property
    def busy(self) -> bool:
        return bool(self._execs)

    # -- transitions -------------------------------------------------------------------------

    def begin_boot(self) -> None:
        self.require("boot")
        self.state = _BOOTING

    def finish_boot(self) -> None:
        if self.state is not _BOOTING:
            raise SandboxBootError(f"the {self.kind} was stopped while it booted")
        self.state = _RUNNING

    def fail_boot(self, reason: str) -> SandboxBootError:
        """Record a failed boot (the sandbox is stopped); returns the error to raise."""
        if self.state is _BOOTING:
            self.state = _STOPPED
            self.crash_reason = f"boot failed: {reason}"
        return SandboxBootError(f"{self.kind} failed to boot: {reason}")

    def fail_isolation(self, reason: str) -> SandboxIsolationError:
        """Record a boot refused for want of isolation (the sandbox is stopped)."""
        self.fail_boot(reason)
        return SandboxIsolationError(
            f"{self.kind} refuses to run tool code: {reason}; install bubblewrap, or run "
            "without isolation knowingly (kelpie serve --unsafe-sandbox)",
            reason=reason,
        )

    def pause(self) -> None:
        """Freeze the timeouts of the commands in flight (they keep what they had left)."""
        self.state = _PAUSED
        self._unpaused = trio.Event()
        for command in self._execs.values():
            command.freeze()

    def resume(self) -> None:
        self.state = _RUNNING
        for command in self._execs.values():
            command.thaw()
        self._unpaused.set()

    def stop(self) -> bool:
        """Stop (cancelling the commands in flight); False if it was stopped already."""
        if self.state is _STOPPED:
            return False
        self.state = _STOPPED
        for command in self._execs.values():
            command.scope.cancel()
        self._unpaused.set()
        return True

    def crash(self, reason: str) -> None:
        if self.state is not _STOPPED:
            self.crash_reason = reason
        self.stop()

    # -- commands ----------------------------------------------------------------------------

    @contextmanager
    def command(self, timeout: float) -> Iterator[trio.CancelScope]:
        """Enter a cancel scope for one command, with its timeout as deadline, tracked while
        open. ``scope.cancelled_caught`` afterwards: it timed out, or stop/crash cancelled it."""
        key = next(self._ids)
        command = self._execs[key] = _Command(trio.CancelScope(), timeout)
        if self.state is _PAUSED:
            command.freeze()
        try:
            with command.scope:
                yield command.scope
        finally:
            del self._execs[key]

    async def wait_unpaused(self) -> None:
        """Return once the sandbox is not paused (at once if it is not)."""
        while self.state is _PAUSED:
            await self._unpaused.wait()
