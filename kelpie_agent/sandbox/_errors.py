"""Errors raised by the sandbox port.

Every implementation raises only these (plus ``TypeError``/``ValueError`` for bad arguments), so
callers never see a subprocess's or a filesystem's own exception types.
"""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = [
    "NO_BWRAP",
    "CorruptSnapshotError",
    "ExecTimeoutError",
    "PathOutsideSandboxError",
    "PauseError",
    "RestoreError",
    "SandboxBootError",
    "SandboxCrashedError",
    "SandboxError",
    "SandboxFileError",
    "SandboxIsolationError",
    "SandboxStateError",
    "SnapshotError",
]


NO_BWRAP = "bubblewrap (bwrap) is not installed"


class SandboxError(KelpieError):
    """Root of the sandbox errors."""


class SandboxStateError(SandboxError):
    """The operation is not legal in the sandbox's current state (e.g. exec before boot)."""

    def __init__(self, message: str, *, operation: str = "", state: str = "") -> None:
        super().__init__(message)
        self.operation = operation
        self.state = state


class SandboxBootError(SandboxError):
    """The sandbox failed to boot; it is stopped and cannot be used."""


class SandboxIsolationError(SandboxBootError):
    """The sandbox must isolate its commands (Linux namespaces through bubblewrap) and cannot
    here: ``bwrap`` is missing or cannot create namespaces. Nothing ran. Install bubblewrap, or
    choose ``isolation="none"`` (``kelpie serve --unsafe-sandbox``) knowingly. ``reason`` is
    the short why ("bubblewrap (bwrap) is not installed")."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class SandboxCrashedError(SandboxError):
    """The sandbox crashed (during this operation or before it); it is stopped."""


class ExecTimeoutError(SandboxError):
    """A command ran past its timeout and was killed; the sandbox itself is still running.

    ``stdout``/``stderr`` hold what the command printed before it was killed (possibly empty).
    """

    def __init__(self, message: str, *, timeout: float, stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.timeout = timeout
        self.stdout = stdout
        self.stderr = stderr


class PauseError(SandboxError):
    """Pausing failed; the sandbox is still running."""


class SnapshotError(SandboxError):
    """Taking a snapshot failed; the sandbox is unchanged."""


class RestoreError(SandboxError):
    """Restoring a snapshot failed; the sandbox's working area is unchanged."""


class CorruptSnapshotError(RestoreError):
    """The snapshot bytes fail their checksum (or are not a snapshot at all); nothing restored."""


class PathOutsideSandboxError(SandboxError):
    """A file tool was given a path that leads outside the sandbox's working area."""


class SandboxFileError(SandboxError):
    """A file tool failed inside the working area: no such file, a directory, too large..."""
