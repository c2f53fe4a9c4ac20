"""PostgresKV: the storage port on a PostgreSQL table ``kv(key bytea primary key, value bytea)``.

Correctness under concurrency comes from the server: every statement runs in a SERIALIZABLE
transaction, so PostgreSQL's serializable snapshot isolation tracks reads (including the index
ranges scans cover) across all connections and processes sharing the database. SQLSTATE 40001
(serialization failure) and 40P01 (deadlock) become :class:`ConflictError`.

A port transaction holds one connection for its lifetime: it takes its snapshot on entry, reads
on the server, buffers writes in memory and sends them (in key order, to avoid lock-order
deadlocks) just before ``COMMIT``; so no row lock is held while caller code runs. Single
operations outside a transaction are one-statement transactions, retried on conflict.

psycopg's async API is asyncio-only, so the sync API runs in trio worker threads, one connection
per thread at a time, from a small pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import psycopg
import psycopg.errors
import trio
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from ._checksum import frame, unframe
from ._errors import ConflictError, StorageError, StorageUnavailableError
from ._keys import check_key, check_scan, check_value, prefix_end
from ._txn import BufferedTransaction, Write

if TYPE_CHECKING:
    from ._port import KV

__all__ = ["PostgresKV"]

T = TypeVar("T")
Conn = psycopg.Connection[TupleRow]

_SCHEMA_LOCK = 0x6B656C706965  # pg_advisory_xact_lock id ("kelpie") serializing CREATE TABLE
_SCHEMA = "CREATE TABLE IF NOT EXISTS kv (key bytea PRIMARY KEY, value bytea NOT NULL)"
_GET = "SELECT value FROM kv WHERE key = %s"
_SET = (
    "INSERT INTO kv (key, value) VALUES (%s, %s)"
    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
_DELETE = "DELETE FROM kv WHERE key = %s"
_SCAN = {
    (has_end, reverse): "SELECT key, value FROM kv WHERE key >= %s"
    + (" AND key < %s" if has_end else "")
    + (" ORDER BY key DESC" if reverse else " ORDER BY key ASC")
    + " LIMIT %s"
    for has_end in (False, True)
    for reverse in (False, True)
}
_SINGLE_OP_ATTEMPTS = 10


def _translate(exc: psycopg.Error) -> StorageError:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected):
        return ConflictError(f"PostgreSQL: {detail}")
    if isinstance(exc, psycopg.OperationalError):
        return StorageUnavailableError(f"PostgreSQL: {detail}")
    return StorageError(f"PostgreSQL: {detail}")


# -- blocking bodies, run in a worker thread ---------------------------------------------------


def _connect(dsn: str) -> Conn:
    conn = psycopg.connect(dsn, autocommit=False)
    conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
    return conn


def _get(conn: Conn, key: bytes) -> bytes | None:
    row = conn.execute(_GET, (key,)).fetchone()
    return None if row is None else unframe(key, bytes(row[0]))


def _scan(
    conn: Conn, start: bytes, end: bytes | None, limit: int | None, reverse: bool
) -> list[tuple[bytes, bytes]]:
    if limit == 0 or (end is not None and end <= start):
        return []
    params = (start, limit) if end is None else (start, end, limit)
    rows = conn.execute(_SCAN[end is not None, reverse], params).fetchall()
    return [(bytes(key), unframe(bytes(key), bytes(framed))) for key, framed in rows]


def _write(conn: Conn, writes: Sequence[Write]) -> None:
    # Rows are written (so locked) in key order: two commits cannot deadlock each other.
    with conn.cursor() as cursor:
        for key, value in sorted(writes, key=lambda write: write[0]):
            if value is None:
                cursor.execute(_DELETE, (key,))
            else:
                cursor.execute(_SET, (key, frame(key, value)))


def _committed(fn: Callable[[Conn], T]) -> Callable[[Conn], T]:
    """``fn`` as a whole transaction of its own."""

    def run(conn: Conn) -> T:
        result = fn(conn)
        conn.commit()
        return result

    return run


def _ensure_schema(conn: Conn) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
    conn.execute(_SCHEMA)
    conn.commit()


class PostgresKV:
    """The storage port on PostgreSQL. Create with ``await PostgresKV.open(dsn)``."""

    def __init__(self, dsn: str, max_connections: int) -> None:
        self._dsn = dsn
        self._idle: list[Conn] = []
        self._slots = trio.Semaphore(max_connections)
        self._closed = False

    @classmethod
    async def open(cls, dsn: str, *, max_connections: int = 8) -> PostgresKV:
        """Connect, creating the ``kv`` table if needed. Each open transaction holds a connection
        and waits for one if all ``max_connections`` are busy."""
        if not isinstance(dsn, str):
            raise TypeError(f"dsn must be a str, not {type(dsn).__name__}")
        if not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"max_connections must be a positive int, not {max_connections!r}")
        kv = cls(dsn, max_connections)
        conn = await kv._checkout()
        try:
            await kv._call(conn, _ensure_schema)
        finally:
            with trio.CancelScope(shield=True):
                await kv._checkin(conn)
        return kv

    # -- connections -----------------------------------------------------------------------

    async def _call(self, conn: Conn, fn: Callable[[Conn], T]) -> T:
        try:
            return await trio.to_thread.run_sync(fn, conn)
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    async def _checkout(self) -> Conn:
        if self._closed:
            raise RuntimeError("PostgresKV is closed")
        await self._slots.acquire()
        try:
            if self._idle:
                return self._idle.pop()
            try:
                return await trio.to_thread.run_sync(_connect, self._dsn)
            except psycopg.Error as exc:
                raise _translate(exc) from exc
        except BaseException:
            self._slots.release()
            raise

    async def _checkin(self, conn: Conn) -> None:
        """Return ``conn`` to the pool, rolled back; close it if it is unusable or we are."""
        try:
            if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                try:
                    await trio.to_thread.run_sync(conn.rollback)
                except psycopg.Error:
                    pass
            if self._closed or conn.closed or conn.broken:
                await trio.to_thread.run_sync(conn.close)
            elif conn.info.transaction_status == TransactionStatus.IDLE:
                self._idle.append(conn)
            else:
                await trio.to_thread.run_sync(conn.close)
        finally:
            self._slots.release()

    async def _single(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` as its own transaction, retrying serialization failures."""
        for attempt in range(1, _SINGLE_OP_ATTEMPTS + 1):
            conn = await self._checkout()
            try:
                return await self._call(conn, _committed(fn))
            except ConflictError:
                if attempt == _SINGLE_OP_ATTEMPTS:
                    raise
            finally:
                with trio.CancelScope(shield=True):
                    await self._checkin(conn)
        raise AssertionError("unreachable")

    # -- KV --------------------------------------------------------------------------------

    async def get(self, key: bytes) -> bytes | None:
        check_key(key)
        return await self._single(lambda conn: _get(conn, key))

    async def set(self, key: bytes, value: bytes) -> None:
        check_key(key)
        check_value(value)
        await self._single(lambda conn: _write(conn, [(key, value)]))

    async def delete(self, key: bytes) -> None:
        check_key(key)
        await self._single(lambda conn: _write(conn, [(key, None)]))

    async def scan(
        self,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        check_scan(start, end, limit, reverse)
        return await self._single(lambda conn: _scan(conn, start, end, limit, reverse))

    async def scan_prefix(
        self, prefix: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        check_key(prefix, "prefix")
        return await self.scan(prefix, prefix_end(prefix), limit=limit, reverse=reverse)

    def transaction(self) -> _PostgresTransaction:
        if self._closed:
            raise RuntimeError("PostgresKV is closed")
        return _PostgresTransaction(self)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        with trio.CancelScope(shield=True):
            for conn in idle:
                await trio.to_thread.run_sync(conn.close)


class _PostgresTransaction(BufferedTransaction):
    def __init__(self, kv: PostgresKV) -> None:
        super().__init__()
        self._kv = kv
        self._conn: Conn | None = None

    def _held(self) -> Conn:
        if self._conn is None:
            raise RuntimeError("transaction holds no connection")
        return self._conn

    async def _begin(self) -> None:
        self._conn = await self._kv._checkout()
        try:
            # The first statement opens the SERIALIZABLE transaction and takes its snapshot, so
            # the transaction observes the database as of entering the `async with`.
            await self._kv._call(self._conn, lambda conn: conn.execute("SELECT 1"))
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._release()
            raise

    async def _read(self, key: bytes) -> bytes | None:
        return await self._kv._call(self._held(), lambda conn: _get(conn, key))

    async def _read_range(
        self, start: bytes, end: bytes | None, limit: int | None, reverse: bool
    ) -> list[tuple[bytes, bytes]]:
        return await self._kv._call(
            self._held(), lambda conn: _scan(conn, start, end, limit, reverse)
        )

    async def _commit(self, writes: list[Write]) -> None:
        await self._kv._call(self._held(), _committed(lambda conn: _write(conn, writes)))

    async def _release(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await self._kv._checkin(conn)


if TYPE_CHECKING:

    def _implements_the_port(kv: PostgresKV) -> KV:
        return kv
