"""Archival memory: passages with embeddings, stored in KV, searched in memory.

Passages are stored one per key (``passage/<agent>/<seq>``, plus an id index) with their
vector as little-endian float64 bytes and the embedder's name. The search index
(:class:`VectorIndex`) is built on first use from storage; a passage embedded by another
embedder is embedded again on load (its stored vector is not comparable). Inserts embed first
(outside any transaction), then write; the index is updated only after the commit.
"""

from __future__ import annotations

import datetime as _dt
import struct
from collections.abc import Iterable

from kelpie_agent.embeddings import Embedder, Passage, SearchHit, VectorIndex
from kelpie_agent.storage import Transaction

from ._archives import archive_passage_writes, archive_passages
from ._codec import pack, unpack
from ._errors import InvalidRequestError, PassageNotFoundError
from ._models import PassageRecord
from ._requests import ListPassages, SearchPassages
from ._runtime import AgentRuntime, zone

__all__ = [
    "Archive",
    "archive_of",
    "delete_passage",
    "insert_passage",
    "list_passages",
    "parse_when",
    "search_passages",
]


def _vector_bytes(vector: Iterable[float]) -> bytes:
    values = list(vector)
    return struct.pack(f"<{len(values)}d", *values)


def _vector(data: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(data) // 8}d", data)


def embedder_name(embedder: Embedder) -> str:
    return str(getattr(embedder, "name", type(embedder).__name__))


def parse_when(text: str | None, timezone: str, *, end: bool, what: str) -> float | None:
    """Epoch seconds from ``YYYY-MM-DD`` or an ISO datetime (naive means the agent's time
    zone). A date alone covers its whole day: its start, or with ``end`` its last instant."""
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise InvalidRequestError(f"{what}: expected an ISO 8601 date, got {text!r}")
    raw = text.strip()
    try:
        if len(raw) == 10:
            day = _dt.date.fromisoformat(raw)
            moment = _dt.datetime.combine(day, _dt.time.max if end else _dt.time.min)
        else:
            moment = _dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequestError(
            f"Invalid {what} format: {text}. Use ISO 8601 format (YYYY-MM-DD or YYYY-MM-DDTHH:MM)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone(timezone))
    return moment.timestamp()


class Archive:
    """One agent's archival memory, loaded."""

    def __init__(self, rt: AgentRuntime) -> None:
        self.rt = rt
        self.embedder = rt.env.embedder
        self.name = embedder_name(self.embedder)
        self.index = VectorIndex(self.embedder.dimensions)
        self.records: dict[str, PassageRecord] = {}
        self.next_seq = 1

    async def load(self) -> None:
        rows = await self.rt.scan_all(self.rt.keys.passages, "archival memory")
        stale: list[PassageRecord] = []
        for _, value in rows:
            record: PassageRecord = unpack(value)
            self.records[record.id] = record
            self.next_seq = max(self.next_seq, record.seq + 1)
            if record.embedder == self.name and len(record.vector) == 8 * self.index.dimensions:
                self._index(record, _vector(record.vector))
            else:
                stale.append(record)
        if stale:
            vectors = await self.embedder.embed([r.text for r in stale])
            for record, vector in zip(stale, vectors, strict=True):
                self._index(record, vector)

    def _index(self, record: PassageRecord, vector: Iterable[float]) -> None:
        self.index.add(Passage(record.id, record.text, vector, record.tags, record.created_at))

    def __len__(self) -> int:
        return len(self.records)

    async def prepare(self, text: str, tags: Iterable[str] | None) -> PassageRecord:
        """A new passage, embedded, not yet stored (its seq is reserved)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequestError("archival passage text must be a non-empty string")
        [vector] = await self.embedder.embed([text])
        shared = self.rt.require().archive_ids  # inserts go to the agent's (first) archive
        seq = 0
        if not shared:
            seq, self.next_seq = self.next_seq, self.next_seq + 1
        return PassageRecord(
            id=self.rt.new_id("passage"),
            seq=seq,
            text=text,
            vector=_vector_bytes(vector),
            embedder=self.name,
            tags=tuple(sorted(set(tags or ()))),
            created_at=self.rt.now(),
            archive_id=shared[0] if shared else None,
        )

    def writes(self, record: PassageRecord) -> list[tuple[bytes, bytes]]:
        if record.archive_id is not None:
            return archive_passage_writes(record)
        keys = self.rt.keys
        return [
            (keys.passage(record.seq), pack(record)),
            (keys.passage_id(record.id), pack(record.seq)),
        ]

    def added(self, record: PassageRecord) -> None:
        """After the commit: make the passage searchable (a shared archive's passages are read
        again at every search)."""
        if record.archive_id is not None:
            return
        self.records[record.id] = record
        self._index(record, _vector(record.vector))

    def removed(self, passage_id: str) -> None:
        self.records.pop(passage_id, None)
        self.index.remove(passage_id)

    async def shared(self) -> dict[str, PassageRecord]:
        """The passages of the agent's attached archives, read now (other agents write them)."""
        found: dict[str, PassageRecord] = {}
        kv = self.rt.ctx.kv
        for archive_id in self.rt.require().archive_ids:
            rows = await self.rt.read(
                lambda a=archive_id: archive_passages(kv, a),  # type: ignore[misc]
                f"archive {archive_id}",
            )
            for record in rows:
                found[record.id] = record
        return found

    async def lookup(self, passage_id: str) -> PassageRecord | None:
        return self.records.get(passage_id) or (await self.shared()).get(passage_id)

    async def search(
        self,
        query: str,
        *,
        top_k: int | None,
        tags: Iterable[str] | None,
        tag_match_mode: str,
        start: float | None,
        end: float | None,
    ) -> list[SearchHit]:
        hits = await self._search(
            query, top_k=top_k, tags=tags, tag_match_mode=tag_match_mode, start=start, end=end
        )
        shared = await self.shared()
        if not shared:
            return hits
        index = VectorIndex(self.index.dimensions)
        stale = []
        for record in shared.values():
            if record.embedder == self.name and len(record.vector) == 8 * index.dimensions:
                passage = Passage(
                    record.id, record.text, _vector(record.vector), record.tags, record.created_at
                )
                index.add(passage)
            else:
                stale.append(record)
        if stale:
            vectors = await self.embedder.embed([r.text for r in stale])
            for record, vector in zip(stale, vectors, strict=True):
                index.add(Passage(record.id, record.text, vector, record.tags, record.created_at))
        [vector] = await self.embedder.embed([query])
        more = index.search(
            vector,
            top_k=top_k,
            tags=list(tags) if tags else None,
            tag_match_mode=tag_match_mode,  # type: ignore[arg-type]
            start=start,
            end=end,
        )
        merged = sorted([*hits, *more], key=lambda h: (-h.score, h.passage.id))
        return merged if top_k is None else merged[:top_k]

    async def _search(
        self,
        query: str,
        *,
        top_k: int | None,
        tags: Iterable[str] | None,
        tag_match_mode: str,
        start: float | None,
        end: float | None,
    ) -> list[SearchHit]:
        if tag_match_mode not in ("any", "all"):
            raise InvalidRequestError(
                f"tag_match_mode must be 'any' or 'all', got {tag_match_mode!r}"
            )
        if start is not None and end is not None and start > end:
            raise InvalidRequestError("the date range is empty: start is after end")
        [vector] = await self.embedder.embed([query])
        return self.index.search(
            vector,
            top_k=top_k,
            tags=list(tags) if tags else None,
            tag_match_mode=tag_match_mode,  # type: ignore[arg-type]
            start=start,
            end=end,
        )

    def ordered(self) -> list[PassageRecord]:
        return sorted(self.records.values(), key=lambda r: r.seq)


async def archive_of(rt: AgentRuntime) -> Archive:
    """The agent's archive, loaded on first use."""
    if rt.archive is None:
        archive = Archive(rt)
        await archive.load()
        rt.archive = archive
    assert isinstance(rt.archive, Archive)
    return rt.archive


# -- requests on archival memory (InsertPassage, ListPassages, SearchPassages, DeletePassage) --
async def insert_passage(rt: AgentRuntime, text: str, tags: tuple[str, ...]) -> list[PassageRecord]:
    rt.require()
    archive = await archive_of(rt)
    record = await archive.prepare(text, tags)
    await rt.write(archive.writes(record), "an archival passage")
    archive.added(record)
    return [record]


async def delete_passage(rt: AgentRuntime, passage_id: str) -> None:
    rt.require()
    archive = await archive_of(rt)
    record = await archive.lookup(passage_id)
    if record is None:
        raise PassageNotFoundError(f"passage {passage_id!r} not found on agent {rt.agent_id}")
    keys = [key for key, _ in archive.writes(record)]

    async def build(txn: Transaction) -> None:
        for key in keys:
            await txn.delete(key)

    await rt.commit(build, "a passage")
    archive.removed(passage_id)


async def list_passages(rt: AgentRuntime, request: ListPassages) -> list[PassageRecord]:
    rt.require()
    archive = await archive_of(rt)
    shared = sorted((await archive.shared()).values(), key=lambda r: (r.created_at, r.id))
    records = [*archive.ordered(), *shared]
    position = {r.id: i for i, r in enumerate(records)}
    for cursor in (request.after, request.before):
        if cursor is not None and cursor not in position:
            raise PassageNotFoundError(f"passage {cursor!r} not found on agent {rt.agent_id}")
    low = position[request.after] + 1 if request.after is not None else 0
    high = position[request.before] if request.before is not None else len(records)
    chosen = records[low:high]
    if request.search:
        needle = request.search.casefold()
        chosen = [r for r in chosen if needle in r.text.casefold()]
    if not request.ascending:
        chosen.reverse()
    return chosen[: max(0, request.limit)]


async def search_passages(
    rt: AgentRuntime, request: SearchPassages
) -> list[tuple[PassageRecord, float]]:
    rt.require()
    if isinstance(request.top_k, bool) or not isinstance(request.top_k, int) or request.top_k < 0:
        raise InvalidRequestError(f"top_k must be an integer >= 0, got {request.top_k!r}")
    archive = await archive_of(rt)
    hits = await archive.search(
        request.query,
        top_k=request.top_k,
        tags=request.tags,
        tag_match_mode=request.tag_match_mode,
        start=request.start,
        end=request.end,
    )
    known = {**archive.records, **(await archive.shared())}
    return [(known[h.passage.id], h.score) for h in hits if h.passage.id in known]
