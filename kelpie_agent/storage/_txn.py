"""What every backend's transaction shares: buffered writes, read-your-writes, lifecycle.

A backend subclasses :class:`BufferedTransaction` and supplies reads of the committed state
(``_read``, ``_read_range``), the commit of the buffered writes (``_commit``) and the release of
whatever it holds (``_release``). Optimistic backends also override ``_observed_key`` and
``_observed_range``, which are told exactly which keys and key ranges the caller's results
depended on.
"""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Self

import trio
from sortedcontainers import SortedDict

from ._errors import ConflictError
from ._keys import check_key, check_scan, check_value, prefix_end

__all__ = ["BufferedTransaction", "Write"]

Write = tuple[bytes, bytes | None]  # (key, value), or (key, None) for a delete

_NEW, _OPEN, _DOOMED, _DONE = "new", "open", "doomed", "done"


class BufferedTransaction(abc.ABC):
    def __init__(self) -> None:
        self._writes = SortedDict()  # key -> bytes, or None for a buffered delete
        self._state = _NEW

    # -- backend hooks ---------------------------------------------------------------------

    @abc.abstractmethod
    async def _begin(self) -> None: ...

    @abc.abstractmethod
    async def _read(self, key: bytes) -> bytes | None: ...

    @abc.abstractmethod
    async def _read_range(
        self, start: bytes, end: bytes | None, limit: int | None, reverse: bool
    ) -> list[tuple[bytes, bytes]]: ...

    def _observed_key(self, key: bytes) -> None:  # noqa: B027 - optional hook
        """The caller's result depended on the committed value of ``key``."""

    def _observed_range(self, lo: bytes, hi: bytes | None) -> None:  # noqa: B027 - optional hook
        """The caller's result depended on the committed keys in ``[lo, hi)``."""

    @abc.abstractmethod
    async def _commit(self, writes: list[Write]) -> None:
        """Apply ``writes`` atomically, or raise (``ConflictError`` if not serializable)."""

    @abc.abstractmethod
    async def _release(self) -> None:
        """Give back what the transaction holds; runs once, shielded, after commit or not."""

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._state != _NEW:
            raise RuntimeError("a transaction can only be entered once")
        await self._begin()
        self._state = _OPEN
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        state, self._state = self._state, _DONE
        try:
            if exc_type is None:
                if state == _DOOMED:
                    raise ConflictError("transaction had already hit a conflict; retry it")
                await self._commit(list(self._writes.items()))
        finally:
            with trio.CancelScope(shield=True):
                await self._release()

    def _check_usable(self) -> None:
        if self._state == _NEW:
            raise RuntimeError("use the transaction inside `async with kv.transaction() as txn`")
        if self._state == _DONE:
            raise RuntimeError("the transaction has already finished")
        if self._state == _DOOMED:
            raise ConflictError("transaction had already hit a conflict; retry it")

    # -- the KV operations -----------------------------------------------------------------

    async def get(self, key: bytes) -> bytes | None:
        check_key(key)
        self._check_usable()
        if key in self._writes:
            await trio.lowlevel.checkpoint()
            value: bytes | None = self._writes[key]
            return value
        try:
            value = await self._read(key)
            self._observed_key(key)
        except ConflictError:
            self._state = _DOOMED
            raise
        return value

    async def set(self, key: bytes, value: bytes) -> None:
        check_key(key)
        check_value(value)
        self._check_usable()
        await trio.lowlevel.checkpoint()
        self._writes[key] = value

    async def delete(self, key: bytes) -> None:
        check_key(key)
        self._check_usable()
        await trio.lowlevel.checkpoint()
        self._writes[key] = None

    async def scan(
        self,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        check_scan(start, end, limit, reverse)
        self._check_usable()
        if limit == 0 or (end is not None and end <= start):
            await trio.lowlevel.checkpoint()
            return []
        buffered = [
            (key, self._writes[key])
            for key in self._writes.irange(start, end, inclusive=(True, False))
        ]
        # Each buffered delete can hide at most one committed row, so fetching that many extra
        # committed rows is enough to fill ``limit``.
        base_limit = None if limit is None else limit + sum(v is None for _, v in buffered)
        try:
            base = await self._read_range(start, end, base_limit, reverse)
            merged = dict(base)
            for key, value in buffered:
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            rows = sorted(merged.items(), reverse=reverse)[:limit]
            if limit is not None and len(rows) == limit:
                # Only keys up to the last one returned could have changed the answer.
                last = rows[-1][0]
                self._observed_range(*((last, end) if reverse else (start, last + b"\x00")))
            else:
                self._observed_range(start, end)
        except ConflictError:
            self._state = _DOOMED
            raise
        return rows

    async def scan_prefix(
        self, prefix: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        check_key(prefix, "prefix")
        return await self.scan(prefix, prefix_end(prefix), limit=limit, reverse=reverse)
