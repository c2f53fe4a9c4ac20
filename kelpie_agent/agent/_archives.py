"""Archives: archival memory shared between agents (Letta's ``archives``).

An archive is a named set of passages. Agents attach archives; an agent's archival memory is
then its own passages *and* those of its attached archives (``archival_memory_search`` and
the agent's passage list see them all), and its ``archival_memory_insert`` writes into its
first attached archive, so every agent attached to it sees the insert (Letta: an agent's
archive is the one attached to it). Passages can also be added to an archive directly.

======================================  ============================================
``archive/<id>``                         :class:`ArchiveRecord`
``apassage/<archive>/<passage id>``      :class:`PassageRecord` (with ``archive_id``)
``apassageid/<passage id>``              the archive id (passages addressed by id)
``archiveagent/<archive>/<agent>``       agents attached to it (the agents write it)
======================================  ============================================

Archive writes are plain serializable transactions (an archive is not an actor); passage ids
come from the Ids port, so two agents inserting at once never collide.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from kelpie_agent.embeddings import Embedder
from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

from ._codec import pack, register, unpack
from ._errors import InvalidRequestError, ResourceNotFoundError
from ._models import PassageRecord, check_id
from ._retry import Reader

__all__ = [
    "ArchiveRecord",
    "ArchiveStore",
    "archive_passage_writes",
    "archive_passages",
    "link_key",
]

_ATTEMPTS = 8
_BACKOFF = 0.05
ARCHIVES = b"archive/"


def _mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class ArchiveRecord:
    id: str
    name: str
    description: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    embedding: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


register("archive", ArchiveRecord)


def archive_key(archive_id: str) -> bytes:
    return ARCHIVES + check_id(archive_id, "archive id").encode()


def passage_key(archive_id: str, passage_id: str) -> bytes:
    return f"apassage/{archive_id}/{check_id(passage_id, 'passage id')}".encode()


def passage_prefix(archive_id: str) -> bytes:
    return f"apassage/{archive_id}/".encode()


def passage_id_key(passage_id: str) -> bytes:
    return f"apassageid/{check_id(passage_id, 'passage id')}".encode()


def link_key(archive_id: str, agent_id: str) -> bytes:
    return f"archiveagent/{archive_id}/{agent_id}".encode()


def archive_passage_writes(record: PassageRecord) -> list[tuple[bytes, bytes]]:
    assert record.archive_id is not None
    return [
        (passage_key(record.archive_id, record.id), pack(record)),
        (passage_id_key(record.id), pack(record.archive_id)),
    ]


async def archive_passages(kv: KV | Transaction, archive_id: str) -> list[PassageRecord]:
    """An archive's passages, oldest first."""
    rows = await kv.scan_prefix(passage_prefix(archive_id))
    found: list[PassageRecord] = [unpack(v) for _, v in rows]
    return sorted(found, key=lambda p: (p.created_at, p.id))


def vector_bytes(vector: Iterable[float]) -> bytes:
    values = list(vector)
    return struct.pack(f"<{len(values)}d", *values)


class ArchiveStore:
    """Archives and their passages, outside any actor."""

    def __init__(self, kv: KV, ports: Ports) -> None:
        self.kv = kv
        self.ports = ports
        self.read = Reader(kv, ports.rng, _ATTEMPTS, _BACKOFF)

    async def create(self, name: str, **fields: Any) -> ArchiveRecord:
        now = self.ports.clock.now()
        record = ArchiveRecord(
            self.ports.ids.new("archive"), name, created_at=now, updated_at=now, **fields
        )

        async def build(txn: Transaction) -> None:
            await txn.set(archive_key(record.id), pack(record))

        await self.read.transact(build, f"archive {name}")
        return record

    async def get(self, archive_id: str) -> ArchiveRecord:
        data = await self.read(lambda: self.kv.get(archive_key(archive_id)), "an archive")
        if data is None:
            raise ResourceNotFoundError("archive", archive_id)
        record: ArchiveRecord = unpack(data)
        return record

    async def all(self) -> list[ArchiveRecord]:
        rows = await self.read(lambda: self.kv.scan_prefix(ARCHIVES), "archives")
        found: list[ArchiveRecord] = [unpack(v) for _, v in rows]
        return sorted(found, key=lambda a: (a.created_at, a.id))

    async def update(self, archive_id: str, **changes: Any) -> ArchiveRecord:
        async def build(txn: Transaction) -> ArchiveRecord:
            data = await txn.get(archive_key(archive_id))
            if data is None:
                raise ResourceNotFoundError("archive", archive_id)
            old: ArchiveRecord = unpack(data)
            new = attrs.evolve(old, **changes, updated_at=self.ports.clock.now())
            await txn.set(archive_key(archive_id), pack(new))
            return new

        updated: ArchiveRecord = await self.read.transact(build, f"archive {archive_id}")
        return updated

    async def agents(self, archive_id: str) -> list[str]:
        await self.get(archive_id)
        prefix = f"archiveagent/{archive_id}/".encode()
        rows = await self.read(lambda: self.kv.scan_prefix(prefix), "the archive's agents")
        return [key[len(prefix) :].decode() for key, _ in rows]

    async def delete(self, archive_id: str) -> list[str]:
        """Delete the archive and its passages; returns the agents it was attached to (the
        caller detaches it from them)."""
        attached = await self.agents(archive_id)

        async def build(txn: Transaction) -> None:
            for key, value in await txn.scan_prefix(passage_prefix(archive_id)):
                await txn.delete(key)
                await txn.delete(passage_id_key(unpack(value).id))
            await txn.delete(archive_key(archive_id))

        await self.read.transact(build, f"archive {archive_id}")
        return attached

    async def add_passages(
        self,
        archive_id: str,
        items: list[tuple[str, tuple[str, ...], Mapping[str, Any], float | None]],
        embedder: Embedder,
        embedder_name: str,
    ) -> list[PassageRecord]:
        """Embed and store passages ``(text, tags, metadata, created_at)`` in one transaction."""
        await self.get(archive_id)
        for text, *_ in items:
            if not isinstance(text, str) or not text.strip():
                raise InvalidRequestError("text: a passage needs non-empty text")
        vectors = await embedder.embed([text for text, *_ in items])
        now = self.ports.clock.now()
        records = [
            PassageRecord(
                id=self.ports.ids.new("passage"),
                seq=0,
                text=text,
                vector=vector_bytes(vector),
                embedder=embedder_name,
                tags=tuple(sorted(set(tags))),
                created_at=created if created is not None else now,
                archive_id=archive_id,
                metadata=metadata,
            )
            for (text, tags, metadata, created), vector in zip(items, vectors, strict=True)
        ]

        async def build(txn: Transaction) -> None:
            if await txn.get(archive_key(archive_id)) is None:
                raise ResourceNotFoundError("archive", archive_id)
            for record in records:
                for key, value in archive_passage_writes(record):
                    await txn.set(key, value)

        await self.read.transact(build, f"passages of archive {archive_id}")
        return records

    async def delete_passage(self, archive_id: str, passage_id: str) -> None:
        tried = False  # a retry may follow a commit that landed without an answer

        async def build(txn: Transaction) -> None:
            nonlocal tried
            if await txn.get(passage_key(archive_id, passage_id)) is None:
                if tried:  # gone: this delete's own earlier attempt (or another) landed
                    return
                raise ResourceNotFoundError(
                    "passage", passage_id, f"passage {passage_id!r} not found in {archive_id}"
                )
            tried = True
            await txn.delete(passage_key(archive_id, passage_id))
            await txn.delete(passage_id_key(passage_id))

        await self.read.transact(build, f"passage {passage_id}")
