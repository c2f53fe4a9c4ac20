"""SimKV: the storage port, in memory, for simulation.

:class:`SimKVStore` is the durable side (a disk, or a database host): the sorted data and the
commit versions. It survives a simulated node crash. :class:`SimKV` is a client handle on a
store; several handles may share one store (nodes sharing a database host) or each node may
own its store (node-local disk).

Behaviour matches SqliteKV and PostgresKV: the same checksum framing (verified on every read),
the same optimistic serializable transactions (``kelpie_agent.storage._occ``). Every operation
is a trio scheduling point and goes through :meth:`SimKV._before_op` or
:meth:`SimKV._before_commit`, where the simulator injects faults. No clock, no randomness, no
threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio
from sortedcontainers import SortedDict

from kelpie_agent.storage._checksum import frame, unframe
from kelpie_agent.storage._keys import check_key, check_scan, check_value, prefix_end, short
from kelpie_agent.storage._occ import ConflictTracker, OccTransaction
from kelpie_agent.storage._txn import Write

if TYPE_CHECKING:
    from kelpie_agent.storage import KV

__all__ = ["SimKV", "SimKVStore"]

VERIFY_ONCE = 1024  # frames of this many bytes or more are verified once (Dspeed-18)


class SimKVStore:
    """The durable data behind one or more :class:`SimKV` handles."""

    def __init__(self, min_prune: int | None = None) -> None:
        """``min_prune``: the conflict tracker's pruning threshold (production's by default;
        :func:`open_kv` picks one per seed, FoundationDB-knob style)."""
        self._data = SortedDict()  # key -> framed value
        # key -> (framed, value) of the last frame read and verified: the same frame object
        # again (bytes are immutable) has the same value, so reads skip its CRC (Dspeed-18);
        # a frame written, corrupted or reloaded is a new object and is verified again.
        self._verified: dict[bytes, tuple[bytes, bytes]] = {}
        self._tracker = ConflictTracker() if min_prune is None else ConflictTracker(min_prune)

    def __len__(self) -> int:
        return len(self._data)

    def keys(self) -> list[bytes]:
        """The stored keys, in order (e.g. to pick one to corrupt)."""
        return list(self._data)

    def corrupt(self, key: bytes, bit: int | None = None) -> None:
        """Flip one bit of the stored frame for ``key`` (default: its last bit).

        The next read of ``key`` raises ``ChecksumError``; writing the key again heals it.
        """
        check_key(key)
        if key not in self._data:
            raise KeyError(f"no stored value for key {short(key)} to corrupt")
        framed = bytearray(self._data[key])
        index = len(framed) * 8 - 1 if bit is None else bit
        if not 0 <= index < len(framed) * 8:
            raise ValueError(f"bit {index} is outside the {len(framed)}-byte stored frame")
        framed[index // 8] ^= 0x80 >> (index % 8)
        self._data[key] = bytes(framed)

    def misdirect(self, key: bytes) -> bytes | None:
        """A misdirected write: copy the stored frame of ``key`` onto the slot of its neighbour
        (the next stored key, or the previous one if ``key`` is the last). The frame is intact
        but names ``key`` in its checksum, so the next read of the neighbour raises
        ``ChecksumError``; writing the neighbour again heals it. Returns the neighbour (None if
        ``key`` is not stored or is the only key)."""
        check_key(key)
        framed = self._data.get(key)
        if framed is None:
            return None
        after = list(self._data.irange(minimum=key, inclusive=(False, True)))[:1]
        before = list(self._data.irange(maximum=key, inclusive=(True, False), reverse=True))[:1]
        if not after and not before:
            return None
        target: bytes = (after or before)[0]
        self._data[target] = framed
        self._verified.pop(target, None)
        return target

    # Synchronous, hence atomic under trio; only SimKV and its transactions call these.

    def _unframe(self, key: bytes, framed: bytes) -> bytes:
        """``unframe(key, framed)``, verified once per frame object (see ``_verified``) if it
        is large enough for the CRC to cost more than the lookup."""
        if len(framed) < VERIFY_ONCE:
            return unframe(key, framed)
        seen = self._verified.get(key)
        if seen is not None and seen[0] is framed:
            return seen[1]
        value = unframe(key, framed)
        self._verified[key] = (framed, value)
        return value

    def _get(self, key: bytes) -> bytes | None:
        framed: bytes | None = self._data.get(key)
        return None if framed is None else self._unframe(key, framed)

    def _scan(
        self, start: bytes, end: bytes | None, limit: int | None, reverse: bool
    ) -> list[tuple[bytes, bytes]]:
        rows: list[tuple[bytes, bytes]] = []
        if limit == 0 or (end is not None and end <= start):
            return rows
        for key in self._data.irange(start, end, inclusive=(True, False), reverse=reverse):
            rows.append((key, self._unframe(key, self._data[key])))
            if limit is not None and len(rows) >= limit:
                break
        return rows

    def _apply(self, writes: Sequence[Write]) -> None:
        for key, value in writes:
            if value is None:
                self._data.pop(key, None)
                self._verified.pop(key, None)
            else:
                self._data[key] = frame(key, value)
        self._tracker.record(key for key, _ in writes)


class SimKV:
    """A client handle on a :class:`SimKVStore`; implements ``kelpie_agent.storage.KV``."""

    def __init__(self, store: SimKVStore | None = None) -> None:
        self.store = SimKVStore() if store is None else store
        self._closed = False

    # -- fault-injection seams (the simulator overrides or wraps these) --------------------

    async def _before_op(self, op: str, key: bytes | None) -> None:
        """Runs before every storage access: op is get/set/delete/scan (``key`` None for scans).

        Reads inside transactions come through here too; buffered transactional writes do not
        (they touch no storage until commit).
        """
        await trio.lowlevel.checkpoint()

    async def _before_commit(self, writes: Sequence[Write]) -> None:
        """Runs before a transaction validates and applies ``writes`` (empty if read-only)."""
        await trio.lowlevel.checkpoint()

    async def _after_write(self, op: str, keys: Sequence[bytes]) -> None:
        """Runs after a write is durable and before the caller learns of it (op is
        set/delete/commit): where a crash after the write, or corruption at rest, is injected."""

    # -- KV --------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("SimKV is closed")

    async def get(self, key: bytes) -> bytes | None:
        check_key(key)
        self._check_open()
        await self._before_op("get", key)
        return self.store._get(key)

    async def set(self, key: bytes, value: bytes) -> None:
        check_key(key)
        check_value(value)
        self._check_open()
        await self._before_op("set", key)
        self.store._apply([(key, value)])
        await self._after_write("set", [key])

    async def delete(self, key: bytes) -> None:
        check_key(key)
        self._check_open()
        await self._before_op("delete", key)
        self.store._apply([(key, None)])
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
        return self.store._scan(start, end, limit, reverse)

    async def scan_prefix(
        self, prefix: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        check_key(prefix, "prefix")
        return await self.scan(prefix, prefix_end(prefix), limit=limit, reverse=reverse)

    def transaction(self) -> SimTransaction:
        self._check_open()
        return SimTransaction(self)

    async def close(self) -> None:
        self._closed = True
        await trio.lowlevel.checkpoint()


class SimTransaction(OccTransaction):
    def __init__(self, kv: SimKV) -> None:
        super().__init__(kv.store._tracker)
        self._kv = kv

    async def _read(self, key: bytes) -> bytes | None:
        self._kv._check_open()
        await self._kv._before_op("get", key)
        return self._kv.store._get(key)

    async def _read_range(
        self, start: bytes, end: bytes | None, limit: int | None, reverse: bool
    ) -> list[tuple[bytes, bytes]]:
        self._kv._check_open()
        await self._kv._before_op("scan", None)
        return self._kv.store._scan(start, end, limit, reverse)

    async def _commit(self, writes: list[Write]) -> None:
        self._kv._check_open()
        await self._kv._before_commit(writes)
        if writes:  # read-only transactions saw only their start state: nothing to validate
            self._validate(writes)
            self._kv.store._apply(writes)
            await self._kv._after_write("commit", [key for key, _ in writes])


if TYPE_CHECKING:

    def _implements_the_port(kv: SimKV) -> KV:
        return kv
