"""Ranking texts against a query, as Letta's searches do (tools, messages).

``vector``: cosine of the node's embeddings; ``fts``: the share of the query's words a text
has (texts with none are left out); ``hybrid``: reciprocal rank fusion of both.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kelpie_agent.embeddings import STOP_WORDS, Embedder, Passage, VectorIndex
from kelpie_agent.embeddings._hashing import words

__all__ = ["SEARCH_MODES", "Ranked", "rank", "terms"]

SEARCH_MODES = ("vector", "fts", "hybrid")
_RRF_K = 60  # reciprocal rank fusion's constant (hybrid mode)


def terms(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOP_WORDS}


@attrs.frozen
class Ranked:
    """One text's place: its fused score and its rank in each mode (None: not ranked)."""

    id: str
    score: float
    vector_rank: int | None = None
    fts_rank: int | None = None


async def rank(embedder: Embedder, texts: Mapping[str, str], query: str, mode: str) -> list[Ranked]:
    """The ids of ``texts`` ranked by relevance to ``query``, best first (ties by id)."""
    vector: dict[str, int] = {}
    fts: dict[str, int] = {}
    ids = list(texts)
    if mode in ("vector", "hybrid") and ids:
        index = VectorIndex(embedder.dimensions)
        vectors = await embedder.embed([texts[i] for i in ids])
        for text_id, vec in zip(ids, vectors, strict=True):
            index.add(Passage(text_id, texts[text_id], vec))
        (query_vector,) = await embedder.embed([query])
        hits = index.search(query_vector, top_k=None)
        vector = {hit.passage.id: place for place, hit in enumerate(hits, start=1)}
    if mode in ("fts", "hybrid"):
        asked = terms(query)
        shares = {i: len(asked & terms(texts[i])) / max(1, len(asked)) for i in ids}
        ranked = sorted((i for i in shares if shares[i] > 0), key=lambda i: (-shares[i], i))
        fts = {text_id: place for place, text_id in enumerate(ranked, start=1)}

    def score(text_id: str) -> float:
        return sum(1 / (_RRF_K + ranks[text_id]) for ranks in (vector, fts) if text_id in ranks)

    found = sorted((i for i in ids if i in vector or i in fts), key=lambda i: (-score(i), i))
    return [Ranked(i, score(i), vector.get(i), fts.get(i)) for i in found]
