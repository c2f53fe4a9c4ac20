"""The storage port: an ordered map from byte keys to byte values, with transactions.

kelpie_agent talks to storage only through these protocols, so the same code runs on SQLite or
PostgreSQL in production and on ``kelpie_dst.shims.SimKV`` in simulation. The semantics every
backend must honour are written down in ``docs/storage.md`` and checked by
``kelpie_agent.storage.testing.check_kv_conformance``.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

__all__ = ["KV", "KVOps", "Transaction"]


class KVOps(Protocol):
    """Reads and writes shared by a store and a transaction.

    Keys order bytewise (``b"a" < b"a\\x00" < b"b"``). Keys are at most ``MAX_KEY_SIZE`` bytes.
    """

    async def get(self, key: bytes) -> bytes | None:
        """The value stored at ``key``, or ``None``."""
        ...

    async def set(self, key: bytes, value: bytes) -> None:
        """Store ``value`` at ``key``, replacing any previous value."""
        ...

    async def delete(self, key: bytes) -> None:
        """Remove ``key``; removing a missing key is not an error."""
        ...

    async def scan(
        self,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        """Pairs with ``start <= key < end`` (no upper bound if ``end`` is None), in key order.

        ``reverse`` yields descending order, so ``limit`` then keeps the *last* keys of the range.
        """
        ...

    async def scan_prefix(
        self, prefix: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        """Pairs whose key starts with ``prefix``, like :meth:`scan`."""
        ...


class Transaction(KVOps, Protocol):
    """A serializable, optimistic transaction.

    Writes are buffered and invisible to others until commit; reads see the transaction's own
    writes. Reads (including the ranges scans looked at) are tracked, and a commit that would
    not be serializable raises :class:`~kelpie_agent.storage.ConflictError` instead.
    """


class KV(KVOps, Protocol):
    """A store. Each single operation on it is atomic on its own."""

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """``async with kv.transaction() as txn:`` commits when the block exits normally.

        An exception in the block rolls back and propagates; a conflict at commit (or earlier,
        on a read that can no longer be consistent) raises ``ConflictError``, after which
        nothing the transaction wrote is applied and running it again is safe.
        """
        ...

    async def close(self) -> None:
        """Release the store's resources; closing twice is fine."""
        ...
