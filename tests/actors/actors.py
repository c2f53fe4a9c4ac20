"""Actors used by the actor-runtime tests, and the journal they write.

* :class:`Counter` keeps its count in memory and persists it only in ``deactivate``
  (write-behind): it shows that idle deactivation persists and reactivation restores.
* :class:`Ledger` is write-through and trusts its in-memory state: every increment writes
  ``count`` and the list of applied request ids through ``ctx.transaction()``, computed from
  memory. If two activations were ever effective at once, one would overwrite the other's
  increments and the final check would find acknowledged increments missing. Each write also
  records the writer's activation token, which the commit-log checker compares with the lease.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgpack
import trio

from kelpie_agent.actors import ActorContext, ActorId
from kelpie_agent.storage import ConflictError, Transaction


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Get:
    pass


@attrs.frozen
class Boom:
    """Makes the actor raise ValueError(text)."""

    text: str


@attrs.frozen
class Slow:
    """Sleep, then add n (a message that takes a while)."""

    seconds: float
    n: int = 1


@attrs.frozen
class SlowSave:
    """Sleep, add n, then persist at once (a write through ``ctx.transaction()``)."""

    seconds: float
    n: int = 1


@attrs.frozen
class Inc:
    request: str


@attrs.frozen
class Span:
    """One call of activate/handle/deactivate, as the actor saw it (virtual time)."""

    actor: str
    what: str
    node: str
    epoch: int
    token: str
    start: float
    end: float


class Journal:
    """What the actors of one run did: calls with their time spans, and activations."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def record(self, ctx: ActorContext, what: str, start: float) -> None:
        self.spans.append(
            Span(
                str(ctx.actor_id),
                what,
                ctx.node_id,
                ctx.epoch,
                ctx.activation_id,
                start,
                trio.current_time(),
            )
        )

    def of(self, what: str) -> list[Span]:
        return [s for s in self.spans if s.what == what]


def state_key(actor_id: ActorId) -> bytes:
    return f"test/{actor_id.kind}/{actor_id.id}".encode()


def pack(value: Any) -> bytes:
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


def unpack(raw: bytes | None) -> Any:
    return None if raw is None else msgpack.unpackb(raw, raw=False)


class Counter:
    """Write-behind counter: memory only, persisted on deactivation."""

    fail_activation: set[str] = set()

    def __init__(self, actor_id: ActorId, journal: Journal) -> None:
        self.actor_id = actor_id
        self.journal = journal
        self.count = 0
        self.ctx: ActorContext | None = None

    async def activate(self, ctx: ActorContext) -> None:
        start = trio.current_time()
        self.ctx = ctx
        if self.actor_id.id in Counter.fail_activation:
            raise RuntimeError(f"cannot activate {self.actor_id.id}")
        state = unpack(await ctx.kv.get(state_key(self.actor_id)))
        self.count = state["count"] if state else 0
        self.journal.record(ctx, "activate", start)

    async def handle(self, message: Any) -> Any:
        assert self.ctx is not None
        start = trio.current_time()
        try:
            match message:
                case Add(n):
                    self.count += n
                    return self.count
                case Get():
                    await trio.lowlevel.checkpoint()
                    return self.count
                case Slow(seconds, n):
                    await trio.sleep(seconds)
                    self.count += n
                    return self.count
                case SlowSave(seconds, n):
                    await trio.sleep(seconds)
                    async with self.ctx.transaction() as txn:
                        await txn.set(state_key(self.actor_id), pack({"count": self.count + n}))
                    self.count += n
                    return self.count
                case Boom(text):
                    raise ValueError(text)
            raise TypeError(f"Counter cannot handle {message!r}")
        finally:
            self.journal.record(self.ctx, "handle", start)

    async def deactivate(self) -> None:
        assert self.ctx is not None
        start = trio.current_time()
        async with self.ctx.transaction() as txn:
            await txn.set(state_key(self.actor_id), pack({"count": self.count}))
        self.journal.record(self.ctx, "deactivate", start)


class Ledger:
    """Write-through counter with idempotent increments (deduplicated by request id)."""

    def __init__(self, actor_id: ActorId, journal: Journal, *, fenced: bool = True) -> None:
        self.actor_id = actor_id
        self.journal = journal
        self.fenced = fenced  # False only in the canary test: writes bypass the lease
        self.applied: list[str] = []
        self.ctx: ActorContext | None = None

    async def activate(self, ctx: ActorContext) -> None:
        start = trio.current_time()
        self.ctx = ctx
        try:
            state = unpack(await ctx.kv.get(state_key(self.actor_id)))
            self.applied = list(state["applied"]) if state else []
        finally:
            self.journal.record(ctx, "activate", start)

    async def handle(self, message: Any) -> Any:
        assert self.ctx is not None and isinstance(message, Inc)
        start = trio.current_time()
        try:
            if message.request in self.applied:
                return self.applied.index(message.request) + 1
            applied = [*self.applied, message.request]
            await self._write(applied)
            self.applied = applied
            return len(applied)
        finally:
            self.journal.record(self.ctx, "handle", start)

    async def _write(self, applied: list[str]) -> None:
        ctx = self.ctx
        assert ctx is not None
        value = pack(
            {
                "count": len(applied),
                "applied": applied,
                "token": ctx.activation_id,
                "epoch": ctx.epoch,
            }
        )
        for attempt in range(3):
            try:
                if self.fenced:
                    async with ctx.transaction() as txn:
                        await self._put(txn, value)
                else:
                    async with ctx.kv.transaction() as txn:
                        await self._put(txn, value)
                return
            except ConflictError:
                if attempt == 2:
                    ctx.invalidate()
                    raise
            except BaseException:
                # The commit may or may not have happened: memory can no longer be trusted.
                ctx.invalidate()
                raise

    async def _put(self, txn: Transaction, value: bytes) -> None:
        await txn.set(state_key(self.actor_id), value)

    async def deactivate(self) -> None:
        await trio.lowlevel.checkpoint()  # write-through: nothing unsaved
