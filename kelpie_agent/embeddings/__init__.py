"""Embeddings: the Embedder port, the default HashingEmbedder, and vector search.

``HashingEmbedder`` is deterministic and dependency-free, so archival memory search works
offline and inside the simulator; real embedding providers implement the same
:class:`Embedder` port. :class:`VectorIndex` ranks :class:`Passage` objects by cosine
similarity with tag and date filters. See docs/embeddings.md.
"""

from ._hashing import STOP_WORDS as STOP_WORDS
from ._hashing import HashingEmbedder as HashingEmbedder
from ._port import Embedder as Embedder
from ._port import EmbeddingError as EmbeddingError
from ._port import Vector as Vector
from ._search import Passage as Passage
from ._search import SearchHit as SearchHit
from ._search import TagMatchMode as TagMatchMode
from ._search import VectorIndex as VectorIndex
from ._search import to_epoch_seconds as to_epoch_seconds

__all__ = [
    "STOP_WORDS",
    "Embedder",
    "EmbeddingError",
    "HashingEmbedder",
    "Passage",
    "SearchHit",
    "TagMatchMode",
    "Vector",
    "VectorIndex",
    "to_epoch_seconds",
]
