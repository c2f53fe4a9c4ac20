"""A simulated node's disk holding a real SQLite file, for the production engine under simulation.

With ``[topology.storage] backend = "sqlite"`` (docs/storage.md, "The real engine under
simulation"), every store that :func:`~kelpie_dst.open_kv` would keep in a :class:`SimKVStore`
is a real :class:`~kelpie_agent.storage.SqliteKV` file instead, owned by one node (the node
itself, or the database host), in a temporary directory the run removes when it ends.

The crash model is SIGKILL of the process that has the file open:

* At the crash (a crash hook, so at the very instant, before any task or thread of the node
  runs again) the disk keeps the **crash image**: the bytes of the database file and its WAL
  as the operating system holds them, which is what survives a killed process. The engine's
  threads are killed at their next preemption point, so the image is taken at a statement
  boundary; an open SQLite transaction is in it only as WAL frames without a commit frame.
* The connection is abandoned, never closed cleanly (a clean close would checkpoint the WAL).
  The operating system would release its locks; here the next incarnation opens the image as a
  new file (``<owner>-<name>.<generation>.sqlite``), so the abandoned connection's exclusive
  lock is on a file nobody opens again. Abandoned connections are closed when nothing uses
  them any more, and at the end of the run.
* The next open of the new file runs SQLite's own WAL recovery: committed transactions are
  there, an uncommitted one is not.

:class:`SqliteView` shows the oracles the same thing: what a fresh process would find if the
owner were killed now (the image of the live files, read through a scratch copy).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
import weakref
from collections import Counter
from typing import TYPE_CHECKING

import trio
from sortedcontainers import SortedDict

from kelpie_agent.storage import SqliteKV
from kelpie_agent.storage._occ import ConflictTracker

from .._faults import FaultSpec, register_fault
from ._storage import SimKVStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["SqliteDisk", "SqliteFiles", "SqliteView", "sqlite_files", "use_sqlite"]

Image = tuple[bytes, bytes | None]  # (database file, WAL file or None)

_FAIL_FUNCTION = "kelpie_dst_write_fails"
_FAIL_TRIGGERS = tuple(
    f"CREATE TEMP TRIGGER kelpie_dst_fail_{event.lower()} BEFORE {event} ON main.kv"
    f" WHEN {_FAIL_FUNCTION}({row}.key)"
    " BEGIN SELECT RAISE(ABORT, 'injected storage.write_fail: I/O error'); END"
    for event, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD"))
)

CRASH_IN_COMMIT = register_fault(
    FaultSpec(
        "storage.crash_in_commit",
        "the process that owns a SQLite file is killed while a transaction is being written "
        "(inside its fsync, before COMMIT); only with [topology.storage] backend = 'sqlite'",
        params={"restart_after": 1.0},
        swarm_range=(0.0, 0.0),  # never chosen by swarm: no SimKV scenario moves
        observed="the owner crashes with the transaction open; after restart SQLite's recovery "
        "drops it, and every commit of its batch is unanswered (StorageUnavailableError)",
    )
)

_FILES: weakref.WeakKeyDictionary[Simulation, SqliteFiles] = weakref.WeakKeyDictionary()

# A RAM file system for the run's files, if there is a roomy one (Dspeed-17). The production
# engine commits with synchronous=FULL, one fdatasync per transaction, and on a disk each one
# blocks the run for milliseconds of real time; on tmpfs it costs nothing. The bytes in the
# files, and so every crash image and every trace, are the same wherever they live.
RAM_DIRECTORY = "/dev/shm"
RAM_NEEDED = 1 << 30  # bytes free, so that parallel sweeps cannot fill it (a run uses a few MB)


# The scratch copy a SqliteView reads: closing it checkpoints its WAL into it, which nothing
# needs on disk (the copy is deleted before the next load), so without fsyncs (Dspeed-17).
VIEW_SYNCHRONOUS: str | None = "OFF"


def files_root() -> str | None:
    """Where :class:`SqliteFiles` makes its directory: :data:`RAM_DIRECTORY` if it is a
    writable directory with :data:`RAM_NEEDED` bytes free, else None (the temp directory)."""
    try:
        if not os.access(RAM_DIRECTORY, os.W_OK | os.X_OK):
            return None
        stat = os.statvfs(RAM_DIRECTORY)
    except OSError:
        return None
    return RAM_DIRECTORY if stat.f_bavail * stat.f_frsize >= RAM_NEEDED else None


class SqliteFiles:
    """The SQLite files of one run: a temporary directory, removed by :meth:`close`."""

    def __init__(self, fsync: float = 0.0) -> None:
        if fsync < 0:
            raise ValueError(f"fsync must be at least 0 seconds, not {fsync}")
        self.fsync = fsync  # virtual seconds each SQLite transaction takes to write
        self.directory = tempfile.mkdtemp(prefix="kelpie-dst-sqlite-", dir=files_root())
        self.disks: list[SqliteDisk] = []

    def attach(self, sim: Simulation) -> None:
        """Make :func:`~kelpie_dst.open_kv` store into these files in ``sim``'s run."""
        use_sqlite(sim, self)

    def metrics(self) -> dict[str, float]:
        """Group commit at work: acknowledged writes, the SQLite transactions that carried
        them, and the generations (one per incarnation of an owner that opened its file)."""
        return {
            "sqlite.commits": sum(d.commits for d in self.disks),
            "sqlite.batches": sum(d.batches for d in self.disks),
            "sqlite.generations": sum(d.generation for d in self.disks),
        }

    def close(self) -> None:
        """Close every connection the run left open and remove the files (after the run)."""
        for disk in self.disks:
            disk.close_all()
        shutil.rmtree(self.directory, ignore_errors=True)


def use_sqlite(sim: Simulation, files: SqliteFiles) -> None:
    """Make :func:`~kelpie_dst.open_kv` store into real SQLite files in this run."""
    _FILES[sim] = files


def sqlite_files(sim: Simulation) -> SqliteFiles | None:
    """The run's SQLite files, or None if the run stores into SimKV."""
    return _FILES.get(sim)


def _read_image(path: str) -> Image:
    with open(path, "rb") as db:
        data = db.read()
    wal = None
    if os.path.exists(path + "-wal"):
        with open(path + "-wal", "rb") as log:
            wal = log.read()
    return data, wal


def _write_image(path: str, image: Image) -> None:
    for leftover in (path, path + "-wal", path + "-shm"):
        if os.path.exists(leftover):
            os.remove(leftover)
    data, wal = image
    with open(path, "wb") as db:
        db.write(data)
    if wal is not None:
        with open(path + "-wal", "wb") as log:
            log.write(wal)


def _abandon(kv: SqliteKV) -> bool:
    """Close an abandoned generation's connection if nothing is using it; True if closed."""
    if kv._lock.locked():
        return False
    kv._closed = True
    kv._conn.close()
    return True


class SqliteDisk:
    """One node's SQLite file across its crashes (kept in the owner's ``durable`` state)."""

    def __init__(self, files: SqliteFiles, owner: Node, name: str, min_prune: int) -> None:
        self.files = files
        self.owner = owner
        self.name = name
        self.min_prune = min_prune
        self.generation = 0  # one per incarnation that opened the file
        self.kv: SqliteKV | None = None  # the live generation's engine
        self.poison: Counter[bytes] = Counter()  # keys whose writes the engine fails (write_fail)
        self.corruptions = 0
        self.commits = 0  # writes the engine acknowledged (set, delete, transaction commits)
        self._batches = 0  # SQLite transactions written by the generations that crashed
        self._failed = 0  # SQLite transactions failed by storage.write_fail
        self._writing_in: tuple[int, int] | None = None  # the transaction writing now
        self._image: Image | None = None  # the files as the last crash left them
        self._opening: trio.Event | None = None
        self._abandoned: list[SqliteKV] = []
        self.view = SqliteView(self)
        files.disks.append(self)
        owner.crash_hooks.append(self._crashed)

    def path(self, generation: int | None = None) -> str:
        gen = self.generation if generation is None else generation
        return os.path.join(self.files.directory, f"{self.owner.name}-{self.name}.{gen}.sqlite")

    async def open(self) -> SqliteKV:
        """The live engine, opened on the owner's node (from the last crash image) if needed."""
        while self.kv is None:
            if self._opening is not None:
                await self._opening.wait()
                continue
            opening = self._opening = trio.Event()
            try:
                self._abandoned = [kv for kv in self._abandoned if not _abandon(kv)]
                self.generation += 1
                path = self.path()
                if self._image is not None:
                    _write_image(path, self._image)
                kv = await SqliteKV.open(path)
                self._arm(kv)
                self.kv = kv
                self.owner.sim.trace_event(
                    "storage.sqlite.open",
                    owner=self.owner,
                    generation=self.generation,
                    recovered=self._image is not None,
                )
            finally:
                self._opening = None
                opening.set()
        return self.kv

    def _arm(self, kv: SqliteKV) -> None:
        """The simulation's hooks on a fresh connection: the seed's conflict-tracker knob, and
        connection-local triggers through which storage.write_fail fails a write inside the
        engine's own transaction (an I/O error in the middle of a group commit)."""
        kv._tracker = ConflictTracker(self.min_prune)
        kv._conn.create_function(_FAIL_FUNCTION, 1, lambda key: self._writing(kv, key))
        for trigger in _FAIL_TRIGGERS:
            kv._conn.execute(trigger)

    def _writing(self, kv: SqliteKV, key: bytes) -> bool:
        """Called by SQLite (in the engine's thread) for each row a transaction writes:
        the first row of each transaction takes the disk's write time (a simulated sleep,
        inside the open transaction, as a real fsync); True fails the row (write_fail)."""
        transaction = (kv.batches, self._failed)
        if transaction != self._writing_in:
            self._writing_in = transaction
            owner, sim = self.owner, self.owner.sim
            crash = sim.faults.fires(CRASH_IN_COMMIT.name, node=owner.name)
            if crash is not None and owner.name != sim.main_node_name:
                trio.from_thread.run_sync(self._kill, crash.param("restart_after"))
                time.sleep(0)  # a scheduling point: the killed thread goes no further
            if self.files.fsync:
                time.sleep(self.files.fsync)
        if self.poison[key] > 0:
            self._failed += 1
            return True
        return False

    def _kill(self, restart_after: float) -> None:
        self.owner.sim.crash(self.owner)
        self.owner.sim.restart(self.owner, after=restart_after)

    def _crashed(self, node: Node) -> None:
        kv, self.kv = self.kv, None
        if kv is None:
            return
        self._image = _read_image(self.path())
        kv._closed = True  # nothing of the killed process uses it again
        self._abandoned.append(kv)
        self._batches += kv.batches
        node.sim.trace_event(
            "storage.sqlite.crash",
            owner=node,
            generation=self.generation,
            wal_bytes=len(self._image[1] or b""),
        )

    @property
    def batches(self) -> int:
        """SQLite transactions written (group commits), over every generation."""
        return self._batches + (0 if self.kv is None else self.kv.batches)

    def close_all(self) -> None:
        """After the run: close every connection still open (the file is removed next)."""
        for kv in [*self._abandoned, *([self.kv] if self.kv is not None else [])]:
            kv._conn.close()
        self._abandoned = []
        self.kv = None

    def image(self) -> Image | None:
        """What a process opening the file now would find (None: no file yet)."""
        if self.kv is not None:
            return _read_image(self.path())
        return self._image

    async def corrupt(self, key: bytes) -> None:
        """Flip the last bit of ``key``'s stored frame, through the live engine (at rest)."""
        kv = await self.open()

        def flip() -> None:
            row = kv._conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
            if row is not None:
                framed = bytearray(row[0])
                framed[-1] ^= 0x01
                kv._conn.execute("UPDATE kv SET value = ? WHERE key = ?", (bytes(framed), key))

        await kv._run(flip)
        self.corruptions += 1

    async def misdirect(self, key: bytes) -> None:
        """Copy ``key``'s stored frame onto its neighbour's row (the next key, or the previous
        one if ``key`` is the last), through the live engine: a misdirected write at rest."""
        kv = await self.open()

        def copy() -> bool:
            conn = kv._conn
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
            if row is None:
                return False
            near = (
                conn.execute(
                    "SELECT key FROM kv WHERE key > ? ORDER BY key ASC LIMIT 1", (key,)
                ).fetchone()
                or conn.execute(
                    "SELECT key FROM kv WHERE key < ? ORDER BY key DESC LIMIT 1", (key,)
                ).fetchone()
            )
            if near is None:
                return False
            conn.execute("UPDATE kv SET value = ? WHERE key = ?", (row[0], near[0]))
            return True

        if await kv._run(copy):
            self.corruptions += 1


class SqliteView(SimKVStore):
    """A :class:`SimKVStore` whose data is what a fresh process would recover from the SQLite
    file now (read from a scratch copy of the crash image), so the oracles that read stores
    directly read the real engine's durable state. Read-only."""

    def __init__(self, disk: SqliteDisk) -> None:
        super().__init__()
        self._disk = disk
        self._seen: tuple[int, int, int] | None = None

    @property
    def _data(self) -> SortedDict:
        disk = self._disk
        kv = disk.kv
        seen = (disk.generation, -1 if kv is None else kv.batches, disk.corruptions)
        if seen != self._seen:
            self._rows = self._load()
            self._seen = seen
        return self._rows

    @_data.setter
    def _data(self, value: SortedDict) -> None:
        self._rows = value

    def _load(self) -> SortedDict:
        rows = SortedDict()
        image = self._disk.image()
        if image is None:
            return rows
        disk = self._disk
        scratch = os.path.join(disk.files.directory, f"view-{disk.owner.name}-{disk.name}.sqlite")
        _write_image(scratch, image)
        conn = sqlite3.connect(scratch, isolation_level=None)
        try:
            if VIEW_SYNCHRONOUS is not None:
                conn.execute(f"PRAGMA synchronous={VIEW_SYNCHRONOUS}")
            for key, framed in conn.execute("SELECT key, value FROM kv ORDER BY key"):
                rows[bytes(key)] = bytes(framed)
        except sqlite3.OperationalError:  # no table yet: the engine never committed
            pass
        finally:
            conn.close()
        return rows

    def corrupt(self, key: bytes, bit: int | None = None) -> None:
        raise TypeError("corrupt a SQLite store through its engine: SqliteDisk.corrupt")

    def _apply(self, writes: Sequence[tuple[bytes, bytes | None]]) -> None:
        raise TypeError("a SqliteView is read-only: write through the node's SQLite engine")
