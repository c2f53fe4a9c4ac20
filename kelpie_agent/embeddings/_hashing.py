"""HashingEmbedder: a deterministic, dependency-free embedder (feature hashing).

Each text becomes a bag of weighted features, and each feature is hashed into one of
``dimensions`` buckets with a sign (the "hashing trick"); the vector is then L2-normalised:

* **words**: NFKC-normalised, case-folded runs of letters and digits (apostrophes are dropped,
  so "user's" is "users"). Stop words (a short English list) are skipped.
* **unigrams** of each word's light stem ("flies" → "fly", "running" → "run", "baked" → "bak"),
  weight 1;
* **bigrams** of adjacent stems (after stop words are removed), weight 0.3;
* **character n-grams** (3..5 by default) of each word with boundary markers (``<word>``), so
  morphological variants and typos still overlap; a word's n-grams share weight 0.8 (their
  squared weights sum to 0.64, so whole-word matches still count most).

A unigram or bigram repeated ``c`` times weighs ``1 + ln(c)`` times its base weight, and so do
the n-grams of a word repeated ``c`` times (n-grams that different words share add up). Hashes
come from blake2b, never from ``hash()``, so vectors are identical in every process, whatever
``PYTHONHASHSEED`` is. The embedder knows no synonyms: a paraphrase ranks well only if it shares
words (or word pieces) with the passage. See docs/embeddings.md.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence

import trio

from ._port import Vector

__all__ = ["STOP_WORDS", "HashingEmbedder"]

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905
)

_WORD = re.compile(r"[^\W_]+")
_APOSTROPHES = str.maketrans("", "", "'\u2019")
_PERSON = b"kelpie-hash-v1"  # changing it (or any weight) changes every stored vector
_CACHE_LIMIT = 1 << 18

UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.3
CHAR_WEIGHT = 0.8  # the L2 mass shared by one word's character n-grams

# (suffix, replacement, shortest stem kept): plurals first, then one derivational suffix; in
# each step the first rule that applies wins.
_PLURALS: tuple[tuple[str, str, int], ...] = (
    ("ies", "y", 2),
    ("sses", "ss", 2),
    ("es", "e", 3),
    ("s", "", 3),
)
_SUFFIXES: tuple[tuple[str, str, int], ...] = (
    ("ational", "ate", 3),
    ("ization", "ize", 3),
    ("fulness", "ful", 3),
    ("iveness", "ive", 3),
    ("ousness", "ous", 3),
    ("ation", "ate", 3),
    ("ment", "", 4),
    ("ness", "", 3),
    ("ingly", "", 3),
    ("edly", "", 3),
    ("ied", "y", 2),
    ("ing", "", 3),
    ("ed", "", 3),
    ("ly", "", 3),
)
_NO_S_STRIP = ("ss", "us", "is")


def _strip(word: str, rules: tuple[tuple[str, str, int], ...]) -> str:
    for suffix, replacement, shortest in rules:
        if word.endswith(suffix) and len(word) - len(suffix) >= shortest:
            if suffix == "s" and word.endswith(_NO_S_STRIP):
                return word
            return word[: len(word) - len(suffix)] + replacement
    return word


def stem(word: str) -> str:
    """A light, deterministic suffix stripper (not Porter: small and predictable)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    word = _strip(_strip(word, _PLURALS), _SUFFIXES)
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # bake / baked / baking all become "bak"
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # running -> runn -> run
    return word


def words(text: str) -> list[str]:
    """The normalised words of ``text`` (stop words included)."""
    normal = unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES)
    return _WORD.findall(normal)


class HashingEmbedder:
    """A deterministic :class:`~kelpie_agent.embeddings.Embedder` needing no model or network.

    ``HashingEmbedder(dimensions=512)``; ``char_ngrams=None`` switches character n-grams off,
    ``bigrams=False`` word bigrams, ``stop_words=()`` the stop-word list (or pass your own), and
    ``stemming=False`` the suffix stripping. Vectors are unit length, or all zeros for a text
    with no features (empty, or only stop words).
    """

    def __init__(
        self,
        dimensions: int = 512,
        *,
        char_ngrams: tuple[int, int] | None = (3, 5),
        bigrams: bool = True,
        stop_words: Collection[str] = STOP_WORDS,
        stemming: bool = True,
    ) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        if char_ngrams is not None:
            low, high = char_ngrams
            if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high <= 10):
                raise ValueError(
                    f"char_ngrams must be (low, high) with 1 <= low <= high <= 10, "
                    f"got {char_ngrams!r}"
                )
        if isinstance(stop_words, str):
            raise TypeError("stop_words must be a collection of words, not a string")
        self._dimensions = dimensions
        self._char_ngrams = char_ngrams
        self._bigrams = bigrams
        self._stop_words = frozenset(w.casefold() for w in stop_words)
        self._stemming = stemming
        self._buckets: dict[str, tuple[int, float]] = {}
        self._words: dict[str, tuple[str, tuple[tuple[int, float], ...]]] = {}
        self._name = f"kelpie-hashing-v1-{dimensions}"
        options = (char_ngrams, bigrams, sorted(self._stop_words), stemming)
        if options != ((3, 5), True, sorted(STOP_WORDS), True):
            tag = hashlib.blake2b(repr(options).encode(), digest_size=4, person=_PERSON)
            self._name += "-" + tag.hexdigest()

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self._dimensions})"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def name(self) -> str:
        """A model name for configuration and stored vectors: ``kelpie-hashing-v1-512`` with the
        default options, plus a short digest of the options otherwise."""
        return self._name

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        vectors = [self.vector(text) for text in texts]
        await trio.lowlevel.checkpoint()
        return vectors

    def vector(self, text: str) -> Vector:
        """The embedding of one text, synchronously (the same as summing :meth:`features`
        into their buckets, only faster: each word's n-gram buckets are cached)."""
        if not isinstance(text, str):
            raise TypeError(f"can only embed str, got {type(text).__name__}")
        values = [0.0] * self._dimensions
        counts, stems = self._count(text)
        for word, count in counts.items():
            scale = 1.0 + math.log(count)
            for index, weight in self._word(word)[1]:
                values[index] += weight * scale
        for feature, weight in self._word_features(stems).items():
            index, sign = self._bucket(feature)
            values[index] += sign * weight
        norm = math.sqrt(math.fsum(v * v for v in values))
        if norm == 0.0:
            return tuple(values)
        return tuple(v / norm for v in values)

    def features(self, text: str) -> dict[str, float]:
        """The weighted features of ``text`` (``w:`` unigrams, ``b:`` bigrams, ``c:`` n-grams),
        in first-occurrence order. Useful to see why two texts match."""
        counts, stems = self._count(text)
        found = self._word_features(stems)
        if self._char_ngrams is not None:
            for word, count in counts.items():
                grams = list(_char_ngrams(word, *self._char_ngrams))
                weight = _char_weight(grams) * (1.0 + math.log(count))
                for gram in grams:
                    found["c:" + gram] = found.get("c:" + gram, 0.0) + weight
        return found

    def _count(self, text: str) -> tuple[dict[str, int], list[str]]:
        """Occurrences of each content word (first-occurrence order), and the stems in order."""
        counts: dict[str, int] = {}
        stems: list[str] = []
        for word in words(text):
            if word in self._stop_words:
                continue
            counts[word] = counts.get(word, 0) + 1
            stems.append(self._word(word)[0])
        return counts, stems

    def _word_features(self, stems: list[str]) -> dict[str, float]:
        """Unigram and bigram features, each weighing ``base * (1 + ln count)``."""
        counts: dict[str, int] = {}
        for s in stems:
            counts["w:" + s] = counts.get("w:" + s, 0) + 1
        if self._bigrams:
            for first, second in itertools.pairwise(stems):
                key = f"b:{first} {second}"
                counts[key] = counts.get(key, 0) + 1
        return {
            f: (UNIGRAM_WEIGHT if f[0] == "w" else BIGRAM_WEIGHT) * (1.0 + math.log(c))
            for f, c in counts.items()
        }

    def _word(self, word: str) -> tuple[str, tuple[tuple[int, float], ...]]:
        """A word's stem and its character n-grams' (bucket, signed weight) pairs, cached."""
        cached = self._words.get(word)
        if cached is not None:
            return cached
        pairs: list[tuple[int, float]] = []
        if self._char_ngrams is not None:
            grams = list(_char_ngrams(word, *self._char_ngrams))
            weight = _char_weight(grams)
            for gram in grams:
                index, sign = self._bucket("c:" + gram)
                pairs.append((index, sign * weight))
        entry = (stem(word) if self._stemming else word, tuple(pairs))
        if len(self._words) >= _CACHE_LIMIT:
            self._words.clear()
        self._words[word] = entry
        return entry

    def _bucket(self, feature: str) -> tuple[int, float]:
        cached = self._buckets.get(feature)
        if cached is not None:
            return cached
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_PERSON).digest()
        value = int.from_bytes(digest, "little")
        bucket = ((value & 0xFFFFFFFF) % self._dimensions, 1.0 if (value >> 32) & 1 else -1.0)
        if len(self._buckets) >= _CACHE_LIMIT:
            self._buckets.clear()
        self._buckets[feature] = bucket
        return bucket


def _char_weight(grams: list[str]) -> float:
    return CHAR_WEIGHT / math.sqrt(len(grams)) if grams else 0.0


def _char_ngrams(word: str, low: int, high: int) -> Iterable[str]:
    marked = f"<{word}>"
    for n in range(low, high + 1):
        for start in range(len(marked) - n + 1):
            yield marked[start : start + n]
