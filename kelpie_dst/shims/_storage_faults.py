"""The storage fault domain: SimKV as seen from one node, with faults injected at the port.

``open_kv(node)`` gives a node a KV handle. Its durable store lives in the owner's
``durable`` state, so it survives crashes: the node itself (a local disk), or, with
``host=db_node``, a database host that several nodes share. A node partitioned from its
database host, or whose host is down, gets :class:`StorageUnavailableError`.

Faults (all probabilities default to zero; see docs/faults.md):

======================== ==================================================================
``storage.write_fail``    a write (set, delete, commit) fails with ``StorageError``; nothing
                          is applied
``storage.read_fail``     a read (get, scan) fails with ``StorageError``
``storage.latency``       an operation takes ``min``..``max`` extra seconds
``storage.corruption``    a value is stored with one bit flipped; reading it raises
                          ``ChecksumError`` (until it is written again)
``storage.misdirect``     a written frame also lands on its neighbour's slot (the next stored
                          key): reading the neighbour raises ``ChecksumError`` (the frame's
                          checksum names the key it was written for) until it is written again;
                          never chosen by swarm mode
``storage.crash_before_write`` the node crashes before the write reaches the disk
``storage.crash_after_write``  the write is durable, then the node crashes before the caller
                          learns it
``storage.conflict``      a commit fails with a spurious ``ConflictError`` (retryable)
``storage.unavailable``   an operation fails with ``StorageUnavailableError``
``storage.commit_unknown`` a commit applies, then fails with ``StorageUnavailableError``
                          (``lag``: then reading what it wrote fails for that long)
======================== ==================================================================

Crash faults apply to writes only, and never to the run's main node.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from kelpie_agent.storage._errors import ConflictError, StorageError, StorageUnavailableError
from kelpie_agent.storage._txn import Write

from .._faults import FaultSpec, register_fault
from .._rng import derive_seed
from .._storms import StormSpec, register_storm
from ._sqlite_disk import sqlite_files
from ._storage import SimKV, SimKVStore

if TYPE_CHECKING:
    from .._nodes import Node
    from .._sim import Simulation

__all__ = ["FaultyKV", "open_direct_kv", "open_kv"]

_R = register_fault
WRITE_FAIL = _R(
    FaultSpec(
        "storage.write_fail",
        "a write fails; nothing is applied",
        swarm_range=(0.0, 0.1),
        observed="set/delete/commit raise StorageError; the store is unchanged",
    )
)
READ_FAIL = _R(
    FaultSpec(
        "storage.read_fail",
        "a read fails",
        swarm_range=(0.0, 0.1),
        observed="get/scan raise StorageError",
    )
)
LATENCY = _R(
    FaultSpec(
        "storage.latency",
        "an operation is slow",
        params={"min": 0.01, "max": 0.5},
        swarm_range=(0.0, 0.3),
        observed="the operation takes min..max extra virtual seconds",
    )
)
CORRUPTION = _R(
    FaultSpec(
        "storage.corruption",
        "a written value is stored with one bit flipped",
        swarm_range=(0.0, 0.02),
        observed="later reads of that key raise ChecksumError until it is written again",
    )
)
MISDIRECT = _R(
    FaultSpec(
        "storage.misdirect",
        "a written frame also lands on the slot of its neighbour (the next stored key)",
        swarm_range=(0.0, 0.0),
        observed="later reads of the neighbour raise ChecksumError until it is written again "
        "(a frame's checksum covers its key); never chosen by swarm mode",
    )
)
CRASH_BEFORE = _R(
    FaultSpec(
        "storage.crash_before_write",
        "the node crashes just before a write reaches the disk",
        swarm_range=(0.0, 0.02),
        observed="the write is lost; the node's tasks are cancelled and it restarts later",
    )
)
CRASH_AFTER = _R(
    FaultSpec(
        "storage.crash_after_write",
        "the write is durable, then the node crashes before the caller learns it",
        swarm_range=(0.0, 0.02),
        observed="after restart the write is present although it was never acknowledged",
    )
)
CONFLICT = _R(
    FaultSpec(
        "storage.conflict",
        "a commit aborts with a spurious conflict",
        swarm_range=(0.0, 0.1),
        observed="the commit raises ConflictError (retryable); nothing is applied",
    )
)
UNAVAILABLE = _R(
    FaultSpec(
        "storage.unavailable",
        "the database cannot be reached for one operation",
        swarm_range=(0.0, 0.05),
        observed="the operation raises StorageUnavailableError before it reaches the store "
        "(see storage.commit_unknown for a commit that applied)",
    )
)
COMMIT_UNKNOWN = _R(
    FaultSpec(
        "storage.commit_unknown",
        "a commit is applied, but the connection drops before the caller learns it (FDB's "
        "commit_unknown_result)",
        params={"lag": 0.0},
        swarm_range=(0.0, 0.05),
        observed="the commit raises StorageUnavailableError although it is durable; retrying it "
        "blindly applies it twice unless the writes are idempotent; with lag > 0 the storage "
        "servers holding what it wrote fall behind: reading those keys (get) fails with "
        "StorageUnavailableError for lag seconds, so a read-back of the commit can give up",
    )
)
STORM = register_storm(
    StormSpec(
        "storage",
        "the database fails half the time, commits land without an answer, latency spikes "
        "longer than a lease",
        (
            ("storage.write_fail", 0.5, ()),
            ("storage.read_fail", 0.3, ()),
            ("storage.unavailable", 0.3, ()),
            ("storage.commit_unknown", 0.2, ()),
            ("storage.conflict", 0.3, ()),
            ("storage.latency", 0.3, (("min", 1.0), ("max", 8.0))),
        ),
        length=(1.5, 4.0),
    )
)
_LAGGING: weakref.WeakKeyDictionary[SimKVStore, dict[bytes, float]] = weakref.WeakKeyDictionary()
"""storage.commit_unknown's lag: per store, key -> until when a get of it fails."""
RESTART_AFTER = 1.0  # seconds until a node crashed by a storage fault boots again
UNREACHABLE_TIMEOUT = 1.0  # seconds a client waits for an unreachable database host


class FaultyKV(SimKV):
    """A node's handle on a :class:`SimKVStore`, with the storage faults and topology."""

    def __init__(
        self, sim: Simulation, node: Node, store: SimKVStore, host: Node | None = None
    ) -> None:
        super().__init__(store)
        self.sim = sim
        self.node = node
        self.host = host if host is not None and host is not node else None
        self._faults = sim.faults

    async def _before_op(self, op: str, key: bytes | None) -> None:
        await self._reach(op)
        lagging = _LAGGING.get(self.store)
        if lagging and key is not None and op == "get":
            until = lagging.get(key)
            if until is not None and trio.current_time() < until:
                raise StorageUnavailableError(
                    "injected storage.commit_unknown lag: the key's storage server is behind"
                )
        is_write = op in ("set", "delete")
        kind = WRITE_FAIL if is_write else READ_FAIL
        if self._faults.fires(kind.name, node=self.node.name, op=op) and not (
            is_write and key is not None and self._fails_in_engine([key])
        ):
            raise StorageError(f"injected {kind.name} on {op}")
        if is_write:
            await self._maybe_crash(CRASH_BEFORE.name, op)

    async def _before_commit(self, writes: Sequence[Write]) -> None:
        await self._reach("commit")
        if not writes:
            return
        if self._faults.fires(WRITE_FAIL.name, node=self.node.name, op="commit"):
            if not self._fails_in_engine([key for key, _ in writes]):
                raise StorageError("injected storage.write_fail on commit")
        elif self._faults.fires(CONFLICT.name, node=self.node.name):
            raise ConflictError("injected storage.conflict")
        await self._maybe_crash(CRASH_BEFORE.name, "commit")

    def _fails_in_engine(self, keys: Sequence[bytes]) -> bool:
        """storage.write_fail fired for a write of ``keys``. False: fail it here, at the port
        (SimKV). A backend whose engine can fail the write itself arranges that and returns
        True (the real SQLite engine: kelpie_dst/shims/_sqlite_faults.py)."""
        return False

    async def _after_write(self, op: str, keys: Sequence[bytes]) -> None:
        await self._corrupt_written(keys)
        await self._misdirect_written(keys)
        await self._maybe_crash(CRASH_AFTER.name, op)
        await trio.lowlevel.checkpoint()
        if op == "commit":
            unknown = self._faults.fires(COMMIT_UNKNOWN.name, node=self.node.name)
            if unknown is not None:
                lag = unknown.param("lag")
                if lag > 0:  # the storage servers of what it wrote fall behind
                    until = trio.current_time() + lag
                    lagging = _LAGGING.setdefault(self.store, {})
                    for key in keys:
                        lagging[key] = until
                raise StorageUnavailableError("injected storage.commit_unknown: the commit applied")

    async def _corrupt_written(self, keys: Sequence[bytes]) -> None:
        """storage.corruption: flip a bit of what was just written (no scheduling point)."""
        for key in keys:
            if key in self.store._data and self._faults.fires(CORRUPTION.name, node=self.node.name):
                self.store.corrupt(key)

    async def _misdirect_written(self, keys: Sequence[bytes]) -> None:
        """storage.misdirect: a copy of what was just written lands on the neighbour's slot."""
        if MISDIRECT.name not in self._faults.active:
            return
        for key in keys:
            if key in self.store._data and self._faults.fires(MISDIRECT.name, node=self.node.name):
                self.store.misdirect(key)

    async def _reach(self, op: str) -> None:
        """Node alive, database host reachable, injected unavailability and latency."""
        self.node.check_alive()
        node_name = self.node.name
        delay = 0.0
        if self.host is not None:
            network = self.sim.network
            a, b = self.node.address, self.host.address
            if not (self.host.alive and network.reachable(a, b) and network.reachable(b, a)):
                await trio.sleep(UNREACHABLE_TIMEOUT)
                raise StorageUnavailableError(
                    f"database host {self.host.name!r} is unreachable from {node_name!r}"
                )
            delay += network.link(a, b).latency + network.link(b, a).latency
        if self._faults.fires(UNAVAILABLE.name, node=node_name, op=op):
            raise StorageUnavailableError(f"injected storage.unavailable on {op}")
        slow = self._faults.fires(LATENCY.name, node=node_name, op=op)
        if slow is not None:
            low, high = slow.param("min"), slow.param("max")
            delay += low + (high - low) * self.sim.rng("storage/latency").random()
        if delay:
            await trio.sleep(delay)
        else:
            await trio.lowlevel.checkpoint()
        self.node.check_alive()

    async def _maybe_crash(self, fault: str, op: str) -> None:
        if self.node.name == self.sim.main_node_name:
            return
        if self._faults.fires(fault, node=self.node.name, op=op):
            self.sim.crash(self.node)
            self.sim.restart(self.node, after=RESTART_AFTER)
            await trio.lowlevel.checkpoint()  # the node's tasks are cancelled here
            self.node.check_alive()  # any other caller learns the node is gone


# The conflict tracker's pruning threshold, per seed: production's 1024 is rarely reached by a
# simulated run, so most seeds use a tiny one and prune at nearly every transaction end (a
# knob, as FoundationDB randomizes its own; drawn from the seed alone, so no stream moves).
PRUNE_KNOBS = (1, 4, 32, 1024)


def _prune_knob(sim: Simulation) -> int:
    return PRUNE_KNOBS[derive_seed(sim.seed, "knob/occ-min-prune") % len(PRUNE_KNOBS)]


def open_kv(node: Node, *, host: Node | None = None, name: str = "kv") -> FaultyKV:
    """A KV handle for ``node``: on its own disk, or on database host ``host``."""
    files = sqlite_files(node.sim)
    if files is not None:  # [topology.storage] backend = "sqlite": the real engine
        from ._sqlite_faults import open_sqlite_kv

        return open_sqlite_kv(files, node, host=host, name=name)
    owner = host if host is not None else node
    store = owner.durable.get(f"kelpie_dst.kv/{name}")
    if store is None:
        store = owner.durable[f"kelpie_dst.kv/{name}"] = SimKVStore(_prune_knob(node.sim))
    assert isinstance(store, SimKVStore)
    return FaultyKV(node.sim, node, store, host)


def open_direct_kv(node: Node, *, host: Node | None = None, name: str = "kv") -> SimKV:
    """A handle on the same store as :func:`open_kv`, without faults: an operator's
    provisioning before the run's faults matter, on either backend."""
    files = sqlite_files(node.sim)
    if files is not None:
        from ._sqlite_faults import open_sqlite_kv

        return open_sqlite_kv(files, node, host=host, name=name, faults=False)
    return SimKV(open_kv(node, host=host, name=name).store)
