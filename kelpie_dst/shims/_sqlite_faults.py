"""The storage fault domain over the real SQLite engine: FaultyKV's faults, SqliteKV's code.

:class:`SqliteFaultyKV` is what :func:`~kelpie_dst.open_kv` hands a node when the run stores into
SQLite (``[topology.storage] backend = "sqlite"``). Every fault of the storage domain applies
as on SimKV (the same hooks of :class:`~kelpie_dst.shims.FaultyKV`, drawn in the same order),
and everything else is :class:`~kelpie_agent.storage.SqliteKV`'s own code: its group commit,
its transaction, its OCC validation, its scans and its checksummed frames.

Where the engine runs: on the node that owns the file. A node's own disk runs in the calling
task (its blocking calls on simulated threads of the node); a database host runs each call
in a task of the host (as the database server process would), and the client waits for the
answer, so a client crash never stops a commit half way, and a host crash kills the engine
(the client then gets ``StorageUnavailableError``: the commit may or may not have applied).

``storage.write_fail`` fails a write *inside* the engine: the written keys are poisoned, and a
connection-local trigger makes SQLite abort the statement writing them, so the engine's own
error path runs (rollback of the whole group-commit batch, every commit of it failed).
``storage.corruption`` flips a bit of the stored frame through the engine (at rest).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import outcome
import trio

from kelpie_agent.storage import SqliteKV
from kelpie_agent.storage._errors import StorageError, StorageUnavailableError
from kelpie_agent.storage._keys import check_key, check_scan, check_value
from kelpie_agent.storage._occ import ConflictTracker
from kelpie_agent.storage._sqlite import _SqliteTransaction
from kelpie_agent.storage._txn import Write

from .._errors import NodeDownError
from ._sqlite_disk import SqliteDisk, SqliteFiles
from ._storage_faults import (
    CORRUPTION,
    MISDIRECT,
    UNREACHABLE_TIMEOUT,
    FaultyKV,
    _prune_knob,
)

if TYPE_CHECKING:
    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["FaultySqliteTransaction", "SqliteFaultyKV", "open_sqlite_kv"]

T = TypeVar("T")
_POISONED: contextvars.ContextVar[tuple[bytes, ...]] = contextvars.ContextVar(
    "kelpie_dst.sqlite.poisoned", default=()
)


def sqlite_disk(files: SqliteFiles, owner: Node, name: str) -> SqliteDisk:
    """The owner's SQLite disk for store ``name`` (created on first use, kept across crashes)."""
    disk = owner.durable.get(f"kelpie_dst.kv/{name}")
    if disk is None:
        disk = owner.durable[f"kelpie_dst.kv/{name}"] = SqliteDisk(
            files, owner, name, _prune_knob(owner.sim)
        )
    assert isinstance(disk, SqliteDisk)
    return disk


def open_sqlite_kv(
    files: SqliteFiles,
    node: Node,
    *,
    host: Node | None = None,
    name: str = "kv",
    faults: bool = True,
) -> SqliteFaultyKV:
    owner = host if host is not None else node
    kind = SqliteFaultyKV if faults else _SqliteDirectKV
    return kind(node.sim, node, sqlite_disk(files, owner, name), host)


class SqliteFaultyKV(FaultyKV):
    """A node's handle on a :class:`SqliteDisk`, with the storage faults and topology."""

    def __init__(
        self, sim: Simulation, node: Node, disk: SqliteDisk, host: Node | None = None
    ) -> None:
        super().__init__(sim, node, disk.view, host)
        self.disk = disk

    # -- where the engine runs -------------------------------------------------------------

    async def _engine(self, call: Callable[[SqliteKV], Awaitable[T]]) -> T:
        """``call(engine)`` on the node that owns the file."""
        host = self.host
        if host is None:
            return await call(await self.disk.open())
        answer: list[outcome.Outcome[T]] = []
        done = trio.Event()

        async def serve() -> None:
            async def run() -> T:
                return await call(await self.disk.open())

            result = await outcome.acapture(run)
            if isinstance(result, outcome.Error) and not host.alive:
                # the host was killed under the call: whatever its dying tasks made of it
                # (SqliteKV turns a killed leader into StorageError for its batch), no answer
                # leaves a killed process; the client learns only that the host went away
                answer.append(lost_error)
            else:
                answer.append(result)
            done.set()
            if isinstance(result, outcome.Error) and isinstance(result.error, trio.Cancelled):
                raise result.error

        lost = StorageUnavailableError(f"database host {host.name!r} crashed during the operation")
        lost_error: outcome.Outcome[T] = outcome.Error(lost)
        try:
            host.start_soon(serve, name="kelpie_dst.sqlite.serve")
        except NodeDownError:
            raise StorageUnavailableError(f"database host {host.name!r} is down") from None
        incarnation = host.incarnation
        while not done.is_set():
            with trio.move_on_after(UNREACHABLE_TIMEOUT):
                await done.wait()
            if not done.is_set() and (not host.alive or host.incarnation != incarnation):
                raise lost  # crashed before the call even started
        return answer[0].unwrap()

    def _fails_in_engine(self, keys: Sequence[bytes]) -> bool:
        self.disk.poison.update(keys)
        _POISONED.set(tuple(keys))  # this task's write (a context variable: tasks interleave)
        return True

    async def _write(
        self, before: Callable[[], Awaitable[None]], call: Callable[[], Awaitable[T]]
    ) -> T:
        """A write: its faults (``before``, which may poison its keys), then the engine
        (``call``), which fails it if storage.write_fail poisoned them."""
        _POISONED.set(())
        try:
            await before()
            poisoned = _POISONED.get()
            result = await call()
        finally:
            self.disk.poison.subtract(_POISONED.get())
            _POISONED.set(())
        if poisoned:  # only deletes of missing keys reach here: nothing was changed
            raise StorageError("injected storage.write_fail: I/O error")
        return result

    async def _corrupt_written(self, keys: Sequence[bytes]) -> None:
        for key in keys:
            if self._faults.fires(CORRUPTION.name, node=self.node.name):
                await self._engine(_corrupt(self.disk, key))

    async def _misdirect_written(self, keys: Sequence[bytes]) -> None:
        if MISDIRECT.name not in self._faults.active:
            return
        for key in keys:
            if self._faults.fires(MISDIRECT.name, node=self.node.name):
                await self._engine(_misdirect(self.disk, key))

    # -- KV --------------------------------------------------------------------------------

    async def get(self, key: bytes) -> bytes | None:
        check_key(key)
        self._check_open()
        await self._before_op("get", key)
        return await self._engine(lambda kv: kv.get(key))

    async def set(self, key: bytes, value: bytes) -> None:
        check_key(key)
        check_value(value)
        self._check_open()
        await self._write(
            lambda: self._before_op("set", key), lambda: self._engine(lambda kv: kv.set(key, value))
        )
        self.disk.commits += 1
        await self._after_write("set", [key])

    async def delete(self, key: bytes) -> None:
        check_key(key)
        self._check_open()
        await self._write(
            lambda: self._before_op("delete", key), lambda: self._engine(lambda kv: kv.delete(key))
        )
        self.disk.commits += 1
        await self._after_write("delete", [key])

    async def scan(
        self,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        check_scan(start, end, limit, reverse)
        self._check_open()
        await self._before_op("scan", None)
        return await self._engine(lambda kv: kv.scan(start, end, limit=limit, reverse=reverse))

    def transaction(self) -> FaultySqliteTransaction:  # type: ignore[override]
        self._check_open()
        return FaultySqliteTransaction(self)


class _SqliteDirectKV(SqliteFaultyKV):
    """The same engine with no faults (an operator's provisioning before the run's faults)."""

    async def _before_op(self, op: str, key: bytes | None) -> None:
        await trio.lowlevel.checkpoint()

    async def _before_commit(self, writes: Sequence[Write]) -> None:
        await trio.lowlevel.checkpoint()

    async def _after_write(self, op: str, keys: Sequence[bytes]) -> None:
        pass


class FaultySqliteTransaction(_SqliteTransaction):
    """SqliteKV's own transaction, bound to the engine generation it began on, with the
    storage faults at its reads and commit (as SimTransaction has them)."""

    def __init__(self, faulty: SqliteFaultyKV) -> None:
        # _SqliteTransaction needs its engine, which is only known (and opened) in _begin.
        super(_SqliteTransaction, self).__init__(ConflictTracker())
        self._faulty = faulty

    async def _begin(self) -> None:
        self._kv = await self._faulty._engine(_same)
        self._tracker = self._kv._tracker
        await super()._begin()

    def _check_generation(self, kv: SqliteKV) -> None:
        if kv is not self._kv:
            raise StorageUnavailableError(
                "the database restarted since the transaction began; it was rolled back"
            )

    async def _read(self, key: bytes) -> bytes | None:
        self._faulty._check_open()
        await self._faulty._before_op("get", key)
        read = super()._read

        async def call(kv: SqliteKV) -> bytes | None:
            self._check_generation(kv)
            return await read(key)

        return await self._faulty._engine(call)

    async def _read_range(
        self, start: bytes, end: bytes | None, limit: int | None, reverse: bool
    ) -> list[tuple[bytes, bytes]]:
        self._faulty._check_open()
        await self._faulty._before_op("scan", None)
        read = super()._read_range

        async def call(kv: SqliteKV) -> list[tuple[bytes, bytes]]:
            self._check_generation(kv)
            return await read(start, end, limit, reverse)

        return await self._faulty._engine(call)

    async def _commit(self, writes: list[Write]) -> None:
        faulty = self._faulty
        faulty._check_open()
        commit = super()._commit

        async def call(kv: SqliteKV) -> None:
            self._check_generation(kv)
            await commit(writes)

        await faulty._write(lambda: faulty._before_commit(writes), lambda: faulty._engine(call))
        if writes:
            faulty.disk.commits += 1
            await faulty._after_write("commit", [key for key, _ in writes])


async def _same(kv: SqliteKV) -> SqliteKV:
    return kv


def _corrupt(disk: SqliteDisk, key: bytes) -> Callable[[SqliteKV], Awaitable[None]]:
    async def call(kv: SqliteKV) -> None:
        await disk.corrupt(key)

    return call


def _misdirect(disk: SqliteDisk, key: bytes) -> Callable[[SqliteKV], Awaitable[None]]:
    async def call(kv: SqliteKV) -> None:
        await disk.misdirect(key)

    return call
