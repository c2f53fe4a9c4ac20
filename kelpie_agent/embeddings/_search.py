"""Vector search over stored passages: cosine similarity, top-k, tag and date filters.

Pure Python. The index keeps each vector as a contiguous ``array('d')`` with its norm
precomputed; a query is scored only on its non-zero coordinates (hashing embeddings of short
queries are sparse), gathered with one ``operator.itemgetter`` call per passage. 5,000
passages search in tens of milliseconds (``bench/bench_embeddings.py``); filters run first
and cut that in proportion.

Semantics (docs/embeddings.md):

* score = cosine similarity in [-1, 1]; a zero vector (query or passage) scores 0;
* filters apply before ranking: ``tags`` with ``tag_match_mode="any"`` keeps passages that have
  at least one of the tags, ``"all"`` those that have every one; no tags (``None`` or empty)
  means no tag filter; ``start``/``end`` keep ``start <= created_at <= end`` (inclusive);
* results are sorted by score, highest first, ties broken by passage id (ascending), and
  ``top_k`` of them are returned (``None``: every passage that passed the filters).

``created_at`` is epoch seconds (UTC) as a float, the unit of the Clock port; an aware
``datetime`` is accepted wherever a time is, and a naive one is rejected.
"""

from __future__ import annotations

import heapq
import math
import operator
from array import array
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Literal

import attrs

from ._port import Vector

__all__ = ["Passage", "SearchHit", "TagMatchMode", "VectorIndex", "to_epoch_seconds"]

TagMatchMode = Literal["any", "all"]


def to_epoch_seconds(value: float | datetime, what: str = "time") -> float:
    """Epoch seconds from a number or an aware datetime (naive datetimes are ambiguous)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{what} {value.isoformat()} has no timezone; use an aware datetime")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TypeError(f"{what} must be epoch seconds or an aware datetime, got {value!r}")
    return float(value)


def _tags(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise TypeError(f"tags must be a collection of strings, not the string {value!r}")
    tags = frozenset(value)
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"tags must be strings, got {tag!r}")
    return tags


def _vector(value: Iterable[float]) -> Vector:
    return tuple(float(v) for v in value)


def _created_at(value: float | datetime) -> float:
    return to_epoch_seconds(value, "created_at")


@attrs.frozen
class Passage:
    """A stored text with its embedding. ``created_at`` is epoch seconds (UTC)."""

    id: str
    text: str
    vector: Vector = attrs.field(converter=_vector, repr=False)
    tags: frozenset[str] = attrs.field(default=frozenset(), converter=_tags)
    created_at: float = attrs.field(default=0.0, converter=_created_at)


@attrs.frozen
class SearchHit:
    """One search result: the passage and its cosine similarity to the query."""

    passage: Passage
    score: float


@attrs.frozen
class _Entry:
    passage: Passage
    vector: array[float]  # a contiguous copy: much faster to gather from than a tuple
    inverse_norm: float  # 0.0 for a zero vector, so it scores 0


class VectorIndex:
    """An in-memory index of passages for one embedding size.

    ``add`` replaces a passage with the same id. The index is a plain in-memory structure;
    persistence is the caller's business (archival memory stores passages in KV storage and
    rebuilds the index on activation).
    """

    def __init__(self, dimensions: int) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        self.dimensions = dimensions
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, passage_id: object) -> bool:
        return passage_id in self._entries

    def __iter__(self) -> Iterator[Passage]:
        """Passages in id order."""
        return iter([self._entries[k].passage for k in sorted(self._entries)])

    def get(self, passage_id: str) -> Passage | None:
        entry = self._entries.get(passage_id)
        return entry.passage if entry is not None else None

    def add(self, passage: Passage) -> None:
        if len(passage.vector) != self.dimensions:
            raise ValueError(
                f"passage {passage.id!r} has a {len(passage.vector)}-dimensional vector; "
                f"this index holds {self.dimensions}-dimensional ones"
            )
        norm = math.sqrt(math.fsum(v * v for v in passage.vector))
        vector = array("d", passage.vector)
        self._entries[passage.id] = _Entry(passage, vector, 1.0 / norm if norm else 0.0)

    def remove(self, passage_id: str) -> bool:
        """Remove a passage; ``False`` if there was none with that id."""
        return self._entries.pop(passage_id, None) is not None

    def search(
        self,
        query: Vector,
        *,
        top_k: int | None = 5,
        tags: Iterable[str] | None = None,
        tag_match_mode: TagMatchMode = "any",
        start: float | datetime | None = None,
        end: float | datetime | None = None,
    ) -> list[SearchHit]:
        """The ``top_k`` passages most similar to ``query`` that pass the filters."""
        if len(query) != self.dimensions:
            raise ValueError(
                f"query vector has {len(query)} dimensions; this index holds {self.dimensions}"
            )
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0
        ):
            raise ValueError(f"top_k must be a non-negative integer or None, got {top_k!r}")
        keep = _filter(tags, tag_match_mode, start, end)
        entries: Iterable[tuple[str, _Entry]] = self._entries.items()
        if keep is not None:
            entries = [(pid, entry) for pid, entry in entries if keep(entry.passage)]
        indices = [i for i, v in enumerate(query) if v != 0.0]
        query_norm = math.sqrt(math.fsum(v * v for v in query))
        order: list[tuple[float, str]]
        if not indices:
            order = [(0.0, pid) for pid, _ in entries]
        elif len(indices) == 1:
            [i] = indices
            q = query[i] / query_norm
            order = [(-(q * e.vector[i] * e.inverse_norm), pid) for pid, e in entries]
        else:
            values = [query[i] / query_norm for i in indices]
            pick = operator.itemgetter(*indices)
            mul = operator.mul
            order = [
                (-(sum(map(mul, values, pick(e.vector))) * e.inverse_norm), pid)
                for pid, e in entries
            ]
        best = sorted(order) if top_k is None else heapq.nsmallest(top_k, order)
        # "+ 0.0" turns -0.0 (a zero score negated) back into 0.0
        return [SearchHit(self._entries[pid].passage, -neg + 0.0) for neg, pid in best]


def _filter(
    tags: Iterable[str] | None,
    mode: str,
    start: float | datetime | None,
    end: float | datetime | None,
) -> Callable[[Passage], bool] | None:
    """The filter predicate, or None when nothing is filtered."""
    if mode not in ("any", "all"):
        raise ValueError(f"tag_match_mode must be 'any' or 'all', got {mode!r}")
    wanted = _tags(tags) if tags is not None else frozenset()
    low = to_epoch_seconds(start, "start") if start is not None else -math.inf
    high = to_epoch_seconds(end, "end") if end is not None else math.inf
    if low > high:
        raise ValueError(f"the date range is empty: start {low} is after end {high}")
    if not wanted and start is None and end is None:
        return None

    def keep(passage: Passage) -> bool:
        if not low <= passage.created_at <= high:
            return False
        if not wanted:
            return True
        if mode == "any":
            return not wanted.isdisjoint(passage.tags)
        return wanted <= passage.tags

    return keep
