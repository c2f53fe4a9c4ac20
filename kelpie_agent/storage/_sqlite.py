"""SqliteKV: the embedded production backend, one SQLite file.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``, so a write is fsynced to the WAL
before it is acknowledged. Group commit: commits that arrive while another is being written wait
for it, then the first of them applies all of them in one SQLite transaction, so they share one
fsync; each returns only once its own writes are durable (docs/storage.md, "Group commit").
The file is opened with ``locking_mode=EXCLUSIVE``: this process is its only reader and
writer, which is what lets transactions be validated in memory by
:class:`~kelpie_agent.storage._occ.ConflictTracker` (a second opener gets
``StorageUnavailableError``). Buffered transaction writes are applied in one SQLite transaction
(``BEGIN IMMEDIATE ... COMMIT``).

The one connection is used from one trio worker thread at a time, under a ``trio.Lock``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import trio

from ._checksum import frame, unframe
from ._errors import ChecksumError, StorageError, StorageUnavailableError
from ._keys import check_key, check_scan, check_value, prefix_end
from ._occ import ConflictTracker, OccTransaction
from ._txn import Write

if TYPE_CHECKING:
    from ._port import KV

__all__ = ["SqliteKV"]

T = TypeVar("T")

_SCHEMA = "CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID"
_GET = "SELECT value FROM kv WHERE key = ?"
_SET = (
    "INSERT INTO kv (key, value) VALUES (?, ?)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_DELETE = "DELETE FROM kv WHERE key = ?"
_SCAN = {
    (has_end, reverse): "SELECT key, value FROM kv WHERE key >= ?"
    + (" AND key < ?" if has_end else "")
    + (" ORDER BY key DESC" if reverse else " ORDER BY key ASC")
    + " LIMIT ?"
    for has_end in (False, True)
    for reverse in (False, True)
}

_UNAVAILABLE = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PROTOCOL,
}
_CORRUPT = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def _translate(exc: sqlite3.Error) -> StorageError:
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # primary result code
    if code in _CORRUPT:
        return ChecksumError(f"SQLite database file is corrupt: {exc}")
    if code in _UNAVAILABLE:
        return StorageUnavailableError(f"SQLite: {exc}")
    return StorageError(f"SQLite: {exc}")


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=0.1, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        (mode,) = conn.execute("PRAGMA journal_mode=WAL").fetchone()
        if str(mode).lower() != "wal":
            raise StorageUnavailableError(f"SQLite refused WAL mode for {path!r} (got {mode!r})")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(_SCHEMA)
        conn.execute("BEGIN EXCLUSIVE")  # take the file lock now, not at the first write
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


class _Commit:
    """One commit waiting in :class:`SqliteKV`'s group-commit queue."""

    def __init__(self, writes: Sequence[Write], validate: Callable[[], None] | None) -> None:
        self.writes = writes
        self.validate = validate
        self.taken = False  # a leader has it: it will be applied or failed, not withdrawn
        self.error: BaseException | None = None
        self.done = trio.Event()

    def finish(self, error: BaseException | None) -> None:
        self.error = error
        self.done.set()


class SqliteKV:
    """The storage port on one SQLite file. Create with ``await SqliteKV.open(path)``."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.path = path
        self._conn = conn
        self._lock = trio.Lock()
        self._tracker = ConflictTracker()
        self._closed = False
        self._queue: list[_Commit] = []  # commits waiting for the next group commit
        self.batches = 0  # SQLite transactions written (one fsync each), for tests and figures

    @classmethod
    async def open(cls, path: str | os.PathLike[str]) -> SqliteKV:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        fspath = os.fspath(path)
        try:
            conn = await trio.to_thread.run_sync(_connect, fspath)
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        return cls(conn, fspath)

    async def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a worker thread, holding the connection."""
        async with self._lock:
            if self._closed:
                raise RuntimeError("SqliteKV is closed")
            try:
                return await trio.to_thread.run_sync(fn)
            except sqlite3.Error as exc:
                raise _translate(exc) from exc

    # -- blocking bodies, run in a worker thread -------------------------------------------

    def _get_sync(self, key: bytes) -> bytes | None:
        row = self._conn.execute(_GET, (key,)).fetchone()
        return None if row is None else unframe(key, row[0])

    def _scan_sync(
        self, start: bytes, end: bytes | None, limit: int | None, reverse: bool
    ) -> list[tuple[bytes, bytes]]:
        if limit == 0 or (end is not None and end <= start):
            return []
        params = (start,) if end is None else (start, end)
        cursor = self._conn.execute(
            _SCAN[end is not None, reverse], (*params, -1 if limit is None else limit)
        )
        return [(key, unframe(key, framed)) for key, framed in cursor]

    def _apply_sync(self, batch: Sequence[Sequence[Write]]) -> None:
        """Every commit of ``batch``, in order, in one SQLite transaction (one fsync)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for writes in batch:
                sets = [(k, frame(k, v)) for k, v in writes if v is not None]
                self._conn.executemany(_SET, sets)
                self._conn.executemany(_DELETE, [(k,) for k, v in writes if v is None])
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    async def _apply(
        self, writes: Sequence[Write], validate: Callable[[], None] | None = None
    ) -> None:
        """Commit ``writes`` (after ``validate``), durably, possibly with others (group commit).

        Every commit joins the queue, then waits for the connection. The first to get it takes
        the whole queue, validates each commit in order (recording it, so later ones in the
        batch are validated against it), writes the valid ones in one transaction, and answers
        each; the others find their answer when they get the connection. A commit cancelled
        before a leader took it is withdrawn; once taken, it completes and is answered.
        """
        entry = _Commit(writes, validate)
        self._queue.append(entry)
        try:
            async with self._lock:
                if not entry.taken:
                    await self._commit_queue()
        except trio.Cancelled:
            if not entry.taken:
                self._queue.remove(entry)
                raise
            with trio.CancelScope(shield=True):  # in flight: it is applied, or it fails
                await entry.done.wait()
        if entry.error is not None:
            raise entry.error

    async def _commit_queue(self) -> None:
        batch, self._queue = self._queue, []
        valid: list[_Commit] = []
        for entry in batch:
            entry.taken = True
            try:
                if self._closed:
                    raise RuntimeError("SqliteKV is closed")
                if entry.validate is not None:
                    entry.validate()
            except Exception as refused:
                entry.finish(refused)
                continue
            # recorded now, so the next commits of the batch see it; if the batch then fails,
            # the record only makes some open transactions conflict (and retry) needlessly
            self._tracker.record(key for key, _ in entry.writes)
            valid.append(entry)
        if not valid:
            return
        try:
            await trio.to_thread.run_sync(self._apply_sync, [e.writes for e in valid])
        except sqlite3.Error as exc:
            failed = _translate(exc)
            failed.__cause__ = exc
            for entry in valid:
                entry.finish(failed)
            return
        except BaseException as exc:
            for entry in valid:
                entry.finish(StorageError(f"SQLite: the commit failed: {exc!r}"))
            raise
        self.batches += 1
        for entry in valid:
            entry.finish(None)

    # -- KV --------------------------------------------------------------------------------

    async def get(self, key: bytes) -> bytes | None:
        check_key(key)
        return await self._run(lambda: self._get_sync(key))

    async def set(self, key: bytes, value: bytes) -> None:
        check_key(key)
        check_value(value)
        await self._apply([(key, value)])

    async def delete(self, key: bytes) -> None:
        check_key(key)
        await self._apply([(key, None)])

    async def scan(
        self,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        check_scan(start, end, limit, reverse)
        return await self._run(lambda: self._scan_sync(start, end, limit, reverse))

    async def scan_prefix(
        self, prefix: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        check_key(prefix, "prefix")
        return await self.scan(prefix, prefix_end(prefix), limit=limit, reverse=reverse)

    def transaction(self) -> _SqliteTransaction:
        if self._closed:
            raise RuntimeError("SqliteKV is closed")
        return _SqliteTransaction(self)

    async def close(self) -> None:
        async with self._lock:
            if not self._closed:
                self._closed = True
                await trio.to_thread.run_sync(self._conn.close)


class _SqliteTransaction(OccTransaction):
    def __init__(self, kv: SqliteKV) -> None:
        super().__init__(kv._tracker)
        self._kv = kv

    async def _read(self, key: bytes) -> bytes | None:
        return await self._kv._run(lambda: self._kv._get_sync(key))

    async def _read_range(
        self, start: bytes, end: bytes | None, limit: int | None, reverse: bool
    ) -> list[tuple[bytes, bytes]]:
        return await self._kv._run(lambda: self._kv._scan_sync(start, end, limit, reverse))

    async def _commit(self, writes: list[Write]) -> None:
        if not writes:  # read-only transactions saw only their start state: nothing to validate
            await trio.lowlevel.checkpoint()
            return
        await self._kv._apply(writes, lambda: self._validate(writes))


if TYPE_CHECKING:

    def _implements_the_port(kv: SqliteKV) -> KV:
        return kv
