"""The service's own record, written in the same transactions as the agent state it describes.

``svc/agents/<created µs:016x>/<agent>`` -> :class:`IndexEntry`: the agent list, in creation
order (name and tags for filters), a msgpack map.

:class:`RecordingContext` wraps the actor runtime's context: every fenced transaction the agent
core opens comes back as a :class:`RecordingTransaction`, which, whenever the agent writes or
deletes its record (``agent/<id>``), writes or deletes the index entry *in that same
transaction*. So the index can never disagree with the agent records, whatever crashes. (Run
and otid records are the agent core's own: ``kelpie_agent.agent._runs``.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import msgpack

from kelpie_agent.agent import AgentRecord, Keys
from kelpie_agent.agent._codec import unpack as unpack_agent_record
from kelpie_agent.agent._config import ActorContextLike, ActorIdLike
from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

__all__ = [
    "INDEX",
    "IndexEntry",
    "RecordingContext",
    "RecordingTransaction",
    "decode",
    "encode",
    "index_entry",
    "index_key",
]

INDEX = b"svc/agents/"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def shown_micros(epoch: float) -> int:
    """``epoch`` as the whole microseconds the API shows it with (``datetime.fromtimestamp``,
    as ``epoch_datetime`` renders ``created_at``). ``round(epoch * 1_000_000)`` disagrees with
    it by one for some times (the float product rounds differently), and then two agents
    created within a microsecond listed in an order their shown ``created_at`` contradicts."""
    return (datetime.fromtimestamp(max(0.0, epoch), tz=UTC) - _EPOCH) // _MICROSECOND


def index_key(created_at: float, agent_id: str) -> bytes:
    micros = shown_micros(created_at)
    return INDEX + f"{micros:016x}/{agent_id}".encode()


@attrs.frozen
class IndexEntry:
    """One agent in the list: its position (creation time, id) and what filters look at."""

    agent_id: str
    created_at: float
    name: str
    tags: tuple[str, ...]

    @property
    def key(self) -> bytes:
        return index_key(self.created_at, self.agent_id)


def encode(record: IndexEntry) -> bytes:
    data = attrs.asdict(record, recurse=False)
    data["tags"] = list(record.tags)
    out: bytes = msgpack.packb(data, use_bin_type=True)
    return out


def decode(cls: type[Any], data: bytes) -> Any:
    fields: dict[str, Any] = msgpack.unpackb(data, raw=False)
    if cls is IndexEntry:
        fields["tags"] = tuple(fields["tags"])
    known = {f.name for f in attrs.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in known})


def index_entry(agent: AgentRecord) -> IndexEntry:
    return IndexEntry(agent.id, agent.created_at, agent.name, tuple(agent.tags))


class RecordingTransaction:
    """A fenced transaction of one agent that keeps the agent index in step."""

    def __init__(self, txn: Transaction, keys: Keys) -> None:
        self._txn = txn
        self._keys = keys

    async def get(self, key: bytes) -> bytes | None:
        return await self._txn.get(key)

    async def scan(
        self,
        start: bytes = b"",
        end: bytes | None = None,
        *,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        return await self._txn.scan(start, end, limit=limit, reverse=reverse)

    async def scan_prefix(
        self, prefix: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[tuple[bytes, bytes]]:
        return await self._txn.scan_prefix(prefix, limit=limit, reverse=reverse)

    async def set(self, key: bytes, value: bytes) -> None:
        keys, txn = self._keys, self._txn
        if key == keys.agent:
            old = await txn.get(key)
            entry = index_entry(unpack_agent_record(value))
            if old is not None:
                stale = index_entry(unpack_agent_record(old)).key
                if stale != entry.key:
                    await txn.delete(stale)
            await txn.set(entry.key, encode(entry))
        await txn.set(key, value)

    async def delete(self, key: bytes) -> None:
        if key == self._keys.agent:
            old = await self._txn.get(key)
            if old is not None:
                await self._txn.delete(index_entry(unpack_agent_record(old)).key)
        await self._txn.delete(key)


class RecordingContext:
    """The runtime's ActorContext as the agent core sees it, with recording transactions."""

    def __init__(self, ctx: ActorContextLike) -> None:
        self._ctx = ctx
        self.keys = Keys(ctx.actor_id.id)

    @property
    def actor_id(self) -> ActorIdLike:
        return self._ctx.actor_id

    @property
    def kv(self) -> KV:
        return self._ctx.kv

    @property
    def ports(self) -> Ports:
        return self._ctx.ports

    @property
    def node_id(self) -> str:
        return self._ctx.node_id

    def transaction(self) -> AbstractAsyncContextManager[RecordingTransaction]:
        return self._recording()

    @asynccontextmanager
    async def _recording(self) -> AsyncIterator[RecordingTransaction]:
        async with self._ctx.transaction() as txn:
            yield RecordingTransaction(txn, self.keys)
