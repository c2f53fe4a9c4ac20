"""Reading storage with retries: the one retry-with-backoff loop of kelpie_agent.

Storage fails now and then (a connection drops, a node is partitioned from the database), and
a read is always safe to repeat, so every read of agent state goes through a :class:`Reader`:
up to ``attempts`` tries, sleeping ``backoff * 2**attempt`` seconds (capped at 64 times the
base) times a jitter in [0.5, 1) drawn from the Rng port between them, then
:class:`AgentStorageError`. The agent runtime, the standalone tool and block stores and the
service all read through one (the service turns the final error into a 503).
"""

from __future__ import annotations

import random  # determinism-ok: the Random type of the Rng port only
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from kelpie_agent.storage import KV, StorageError, Transaction

from ._errors import AgentStorageError

__all__ = ["Reader"]

T = TypeVar("T")
_PAGE = 500


class Reader:
    """KV reads retried on :class:`StorageError`; then :class:`AgentStorageError`.

    ``on_give_up()`` runs before the final error is raised (the agent runtime marks itself
    stale there)."""

    def __init__(
        self,
        kv: KV,
        rng: random.Random,
        attempts: int,
        backoff: float,
        *,
        name: str = "",
        on_give_up: Callable[[], None] | None = None,
    ) -> None:
        self.kv = kv
        self.rng = rng
        self.attempts = attempts
        self.backoff_base = backoff
        self.name = name  # who reads, for error messages ("agent agent-1: ")
        self.on_give_up = on_give_up

    async def backoff(self, attempt: int) -> None:
        """Sleep before try ``attempt + 1`` (shared by the writers that retry)."""
        delay = self.backoff_base * (2 ** min(attempt, 6))
        await trio.sleep(delay * (0.5 + 0.5 * self.rng.random()))

    def give_up(self, verb: str, what: str, error: Exception) -> AgentStorageError:
        if self.on_give_up is not None:
            self.on_give_up()
        who = f"{self.name}: " if self.name else ""
        return AgentStorageError(f"{who}{verb} {what} failed {self.attempts} times: {error}")

    async def __call__(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        """``await op()``, retried on storage errors."""
        for attempt in range(self.attempts):
            try:
                return await op()
            except StorageError as error:
                if attempt + 1 == self.attempts:
                    raise self.give_up("reading", what, error) from error
            await self.backoff(attempt)
        raise AssertionError("unreachable")

    async def transact(self, build: Callable[[Transaction], Awaitable[T]], what: str) -> T:
        """``build`` in a transaction until it commits (it must only compute and write, and may
        run again: after an ambiguous commit it finds its own earlier write)."""
        for attempt in range(self.attempts):
            try:
                async with self.kv.transaction() as txn:
                    return await build(txn)
            except StorageError as error:
                if attempt + 1 == self.attempts:
                    raise self.give_up("writing", what, error) from error
            await self.backoff(attempt)
        raise AssertionError("unreachable")

    async def get(self, key: bytes, what: str) -> bytes | None:
        kv = self.kv
        return await self(lambda: kv.get(key), what)

    async def scan(
        self,
        start: bytes,
        end: bytes | None,
        what: str,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        kv = self.kv
        return await self(lambda: kv.scan(start, end, limit=limit, reverse=reverse), what)

    async def scan_all(self, prefix: bytes, what: str) -> list[tuple[bytes, bytes]]:
        """Every pair under ``prefix``, read in pages."""
        from kelpie_agent.storage._keys import prefix_end

        rows: list[tuple[bytes, bytes]] = []
        start, end = prefix, prefix_end(prefix)
        while True:
            page = await self.scan(start, end, what, limit=_PAGE)
            rows.extend(page)
            if len(page) < _PAGE:
                return rows
            start = page[-1][0] + b"\x00"
