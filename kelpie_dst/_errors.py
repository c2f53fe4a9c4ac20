"""The one error root of kelpie_dst, and the failure classes a run can end in."""

from __future__ import annotations

import enum

__all__ = [
    "DstError",
    "FailureKind",
    "InvariantViolation",
    "LivenessError",
    "NodeDownError",
    "NondeterminismError",
    "ScenarioFailed",
    "SimulationCrashed",
    "UsageError",
]


class DstError(Exception):
    """Root of every error kelpie_dst raises on purpose."""


class UsageError(DstError, ValueError):
    """Bad input from a user: an argument, an entry point, a fault specification.

    Its message is one line that names what was wrong; the CLI prints it and exits 64.
    """


class NondeterminismError(DstError):
    """A strict-mode guard tripped, or two runs of one seed diverged."""


class ScenarioFailed(DstError, AssertionError):
    """``assert_deterministic`` ran a seed whose runs failed (the same way every time, or it
    would be a :class:`NondeterminismError`) when the caller did not expect a failure, or
    passed when the caller expected one. The message names the seed and the failure.

    It subclasses AssertionError, so test runners report it as a failed assertion.
    """


class HostNetworkError(NondeterminismError, PermissionError):
    """Code in a simulation tried to reach the host's network (or to block on a socket where
    nothing can wait). The run fails with exit 4 even if the program catches it.

    It subclasses PermissionError (an OSError), so networking code handles it as it handles a
    refused operation, and the message names the caller's file and line.
    """


class InvariantViolation(DstError, AssertionError):
    """A safety property of the system under test does not hold.

    It subclasses AssertionError, so a plain ``assert`` and this error are classified alike.
    """


class NodeDownError(DstError, ConnectionError):
    """An operation was attempted on behalf of a simulated node that is crashed or stopped.

    Ports raise it so that cleanup code on a crashed node cannot write anything.
    """


class FailureKind(enum.IntEnum):
    """How a run failed. The value is the CLI's exit code (see design.md §1.5)."""

    INVARIANT = 1
    LIVENESS = 2
    CRASH = 3
    NONDETERMINISM = 4

    @property
    def label(self) -> str:
        return {
            FailureKind.INVARIANT: "invariant violation",
            FailureKind.LIVENESS: "liveness violation",
            FailureKind.CRASH: "crash (unhandled exception)",
            FailureKind.NONDETERMINISM: "nondeterminism",
        }[self]


class LivenessError(DstError):
    """The system stopped making progress: a deadlock, or the virtual time limit ran out.

    ``report`` lists the blocked tasks and where each one is waiting.
    """

    def __init__(self, message: str, report: str = "") -> None:
        super().__init__(message)
        self.report = report


class SimulationCrashed(DstError):
    """A background task of the simulation raised, so the simulation itself has ended."""
