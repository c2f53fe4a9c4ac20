"""Errors raised by the storage port.

Every backend raises only these (plus ``TypeError``/``ValueError`` for bad arguments and
``RuntimeError`` for using a closed store or a finished transaction), so callers never see a
driver's own exception types.
"""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = ["ChecksumError", "ConflictError", "StorageError", "StorageUnavailableError"]


class StorageError(KelpieError):
    """Root of the storage errors; also raised for backend failures with no better category."""

    retryable: bool = False


class ConflictError(StorageError):
    """A transaction lost a race with a concurrent commit and was rolled back.

    Nothing it wrote was applied, so running the whole transaction again is safe.
    """

    retryable = True


class ChecksumError(StorageError):
    """A stored value failed its integrity check; the bad bytes are never returned."""


class StorageUnavailableError(StorageError):
    """The backend cannot be reached or cannot do I/O (connection lost, disk error, locked file).

    When it interrupts a commit, the commit may or may not have been applied.
    """
