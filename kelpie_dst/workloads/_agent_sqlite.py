"""The agent world's journaling storage handle on the real SQLite engine.

:class:`~kelpie_dst.workloads._agent_world.RecordingKV` journals each commit of a server node
(its fences, its writes, which activation made it) for the single-activation and fencing
oracles, on SimKV. These classes do the same on :class:`~kelpie_dst.shims.SqliteFaultyKV`
(``[topology.storage] backend = "sqlite"``), so the same oracles judge the production engine.

One difference: SqliteKV validates a commit in its group-commit leader, which may be another
task (on a database host, a task of the host), so who commits is noted in the committing task,
before the commit joins the queue, and journaled when the engine validates it (right before
the batch that carries it is written, in the order of the batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kelpie_agent.storage._txn import Write

from ..shims._sqlite_disk import SqliteDisk, sqlite_files
from ..shims._sqlite_faults import FaultySqliteTransaction, SqliteFaultyKV, open_sqlite_kv
from ._agent_world import OWNER_PREFIX, Journal

if TYPE_CHECKING:
    from .._nodes import Node
    from .._sim import Simulation
    from ..shims import FaultyKV

__all__ = ["recording_sqlite_kv"]


def recording_sqlite_kv(
    sim: Simulation, node: Node, host: Node, journal: Journal
) -> FaultyKV | None:
    """The node's journaling handle on the SQLite engine, or None if the run uses SimKV."""
    files = sqlite_files(sim)
    if files is None:
        return None
    disk = open_sqlite_kv(files, node, host=host).disk
    return RecordingSqliteKV(sim, node, disk, host, journal)


class RecordingSqliteKV(SqliteFaultyKV):
    def __init__(
        self, sim: Simulation, node: Node, disk: SqliteDisk, host: Node, journal: Journal
    ) -> None:
        super().__init__(sim, node, disk, host)
        self.journal = journal

    def transaction(self) -> RecordingSqliteTransaction:  # type: ignore[override]
        self._check_open()
        return RecordingSqliteTransaction(self)

    async def _before_op(self, op: str, key: bytes | None) -> None:
        await super()._before_op(op, key)
        if op in ("set", "delete") and key is not None:  # applied right after, unfenced
            self.journal.commit(self.node.name, {}, [(key, None)], self.node.incarnation)


class RecordingSqliteTransaction(FaultySqliteTransaction):
    def __init__(self, kv: RecordingSqliteKV) -> None:
        super().__init__(kv)
        self._recorder = kv
        self._fences: dict[bytes, bytes | None] = {}
        self._writer: tuple[str, int, str | None] = (kv.node.name, kv.node.incarnation, None)

    async def _read(self, key: bytes) -> bytes | None:
        value = await super()._read(key)
        if key.startswith(OWNER_PREFIX):
            self._fences[key] = value
        return value

    async def _commit(self, writes: list[Write]) -> None:
        node = self._recorder.node
        self._writer = (node.name, node.incarnation, self._recorder.journal.activation())
        await super()._commit(writes)

    def _validate(self, writes: list[Write]) -> None:
        super()._validate(writes)
        name, incarnation, writer = self._writer
        self._recorder.journal.commit(name, self._fences, writes, incarnation, writer)
