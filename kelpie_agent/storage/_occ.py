"""Backward validation for optimistic transactions over a single-writer store.

SimKV and SqliteKV both see every commit to their data (SimKV because it *is* the data, SqliteKV
because it holds the file's exclusive lock), so they can decide conflicts in memory: a
:class:`ConflictTracker` numbers commits and remembers, for as long as some transaction that
started earlier is still open, the last commit that wrote each key.

A transaction that started at version ``s`` conflicts if any commit after ``s`` wrote a key it
read, a key it writes, or a key inside a range it scanned. Checking that on every read as well
as at commit means a transaction only ever sees the state as of its start (or gets a
ConflictError), never a mix of before and after someone else's commit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import trio
from sortedcontainers import SortedDict

from ._errors import ConflictError
from ._keys import short
from ._txn import BufferedTransaction, Write

__all__ = ["ConflictTracker", "OccTransaction"]

_MIN_PRUNE = 1024


class ConflictTracker:
    """Commit counter plus the recently written keys still needed for validation."""

    def __init__(self, min_prune: int = _MIN_PRUNE) -> None:
        """``min_prune``: how many remembered writes trigger pruning at the earliest (the
        simulator makes it small for some seeds, so pruning runs all the time there)."""
        if min_prune < 1:
            raise ValueError(f"min_prune must be at least 1, not {min_prune}")
        self._version = 0
        self._written = SortedDict()  # key -> version of the last commit that wrote it
        self._open: Counter[int] = Counter()  # start version -> number of open transactions
        self._min_prune = min_prune
        self._prune_at = min_prune

    @property
    def version(self) -> int:
        return self._version

    def begin(self) -> int:
        """Register an open transaction; returns its start version."""
        self._open[self._version] += 1
        return self._version

    def end(self, start: int) -> None:
        """Unregister a transaction that started at ``start`` (committed or not)."""
        self._open[start] -= 1
        if self._open[start] <= 0:
            del self._open[start]
        if not self._open:
            self._written.clear()  # every later transaction starts after every recorded write
        elif len(self._written) >= self._prune_at:
            oldest = min(self._open)
            stale = [k for k, v in self._written.items() if v <= oldest]
            for key in stale:
                del self._written[key]
            self._prune_at = max(self._min_prune, 2 * len(self._written))

    def record(self, keys: Iterable[bytes]) -> None:
        """Note a commit (or a single write) of ``keys``; call it as the write becomes visible."""
        self._version += 1
        if self._open:
            for key in keys:
                self._written[key] = self._version

    def key_changed(self, start: int, key: bytes) -> bool:
        """Whether a commit after ``start`` wrote ``key``."""
        version: int = self._written.get(key, 0)
        return version > start

    def range_changed(self, start: int, lo: bytes, hi: bytes | None) -> bool:
        """Whether a commit after ``start`` wrote a key in ``[lo, hi)``."""
        keys = self._written.irange(lo, hi, inclusive=(True, False))
        return any(self._written[key] > start for key in keys)


class OccTransaction(BufferedTransaction):
    """A transaction validated by a :class:`ConflictTracker`; subclasses do the I/O.

    A subclass's ``_commit`` must, with no other commit able to interleave, call
    :meth:`_validate`, apply the writes, and call ``tracker.record`` with the written keys.
    """

    def __init__(self, tracker: ConflictTracker) -> None:
        super().__init__()
        self._tracker = tracker
        self._start: int | None = None
        self._read_keys: set[bytes] = set()
        self._read_ranges: list[tuple[bytes, bytes | None]] = []

    async def _begin(self) -> None:
        await trio.lowlevel.checkpoint()
        self._start = self._tracker.begin()

    async def _release(self) -> None:
        if self._start is not None:
            self._tracker.end(self._start)
            self._start = None

    def _since(self) -> int:
        assert self._start is not None, "transaction is not open"
        return self._start

    def _observed_key(self, key: bytes) -> None:
        self._read_keys.add(key)
        if self._tracker.key_changed(self._since(), key):
            raise ConflictError(f"key {short(key)} was changed by a concurrent commit")

    def _observed_range(self, lo: bytes, hi: bytes | None) -> None:
        self._read_ranges.append((lo, hi))
        if self._tracker.range_changed(self._since(), lo, hi):
            raise ConflictError(f"a concurrent commit wrote into scanned range [{short(lo)}, ...)")

    def _validate(self, writes: list[Write]) -> None:
        start = self._since()
        for key in self._read_keys:
            if self._tracker.key_changed(start, key):
                raise ConflictError(f"key {short(key)} was changed by a concurrent commit")
        for key, _ in writes:
            if self._tracker.key_changed(start, key):
                raise ConflictError(f"key {short(key)} was written by a concurrent commit")
        for lo, hi in self._read_ranges:
            if self._tracker.range_changed(start, lo, hi):
                raise ConflictError(
                    f"a concurrent commit wrote into scanned range [{short(lo)}, ...)"
                )
