"""A conformance suite for implementations of the embedder port.

``await check_embedder_conformance(embedder)`` checks what every :class:`Embedder` promises
(docs/embeddings.md): one vector per text, in order, each ``dimensions`` finite floats; the same
text gives the same vector; empty input gives an empty list; empty and non-ASCII texts embed.
"""

from __future__ import annotations

import math

from ._port import Embedder

__all__ = ["check_embedder_conformance"]

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "",
    "Grüße aus München — naïve café, 東京, emoji 🦊",
    "the the the",
    "x" * 5000,
]


def _fail(message: str) -> None:
    raise AssertionError(message)


async def check_embedder_conformance(embedder: Embedder) -> None:
    dims = embedder.dimensions
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        _fail(f"dimensions must be a positive int, got {dims!r}")
    if await embedder.embed([]) != []:
        _fail("embed([]) must return []")
    vectors = await embedder.embed(TEXTS)
    if len(vectors) != len(TEXTS):
        _fail(f"embed() returned {len(vectors)} vectors for {len(TEXTS)} texts")
    for text, vector in zip(TEXTS, vectors, strict=True):
        if len(vector) != dims:
            _fail(f"vector for {text[:20]!r} has {len(vector)} dimensions, expected {dims}")
        if not all(isinstance(v, float) and math.isfinite(v) for v in vector):
            _fail(f"vector for {text[:20]!r} holds a non-float or non-finite value")
    one_by_one = [(await embedder.embed([text]))[0] for text in TEXTS]
    if one_by_one != vectors:
        _fail("embedding texts one at a time must give the same vectors as a batch, in order")
    again = await embedder.embed([TEXTS[2], TEXTS[0], TEXTS[2]])
    if again != [vectors[2], vectors[0], vectors[2]]:
        _fail("the same text must always give the same vector")
