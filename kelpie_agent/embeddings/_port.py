"""The embedder port: text in, fixed-length vectors out.

kelpie_agent reaches embeddings only through :class:`Embedder`. The default,
:class:`~kelpie_agent.embeddings.HashingEmbedder`, is deterministic and needs no model or
network, so archival search works offline and in simulation; a real provider (an HTTP API)
plugs into the same port. See docs/embeddings.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kelpie_agent.errors import KelpieError

__all__ = ["Embedder", "EmbeddingError", "Vector"]

Vector = tuple[float, ...]
"""An embedding: ``dimensions`` floats. Immutable, so it can be stored and shared freely."""


class EmbeddingError(KelpieError):
    """An embedder could not embed (a provider failure, or vectors of the wrong size)."""


class Embedder(Protocol):
    """Turns texts into vectors of one fixed size.

    ``embed`` returns one vector per text, in order; an empty sequence gives an empty list.
    Vectors are compared by cosine similarity, so their scale does not matter (the hashing
    embedder returns unit vectors, or all zeros for a text with no features).
    """

    @property
    def dimensions(self) -> int:
        """The length of every vector this embedder returns."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in the order given."""
        ...
