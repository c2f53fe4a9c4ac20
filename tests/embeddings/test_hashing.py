"""HashingEmbedder: features, options, conformance, paraphrase ranking, simulation."""

from __future__ import annotations

import math

import pytest
import trio

import kelpie_dst
from kelpie_agent.embeddings import STOP_WORDS, HashingEmbedder, Passage, VectorIndex
from kelpie_agent.embeddings._hashing import stem, words
from kelpie_agent.embeddings.testing import check_embedder_conformance

from .corpus import MORE_QUERIES, PASSAGES, QUERIES


@pytest.mark.trio
async def test_conformance() -> None:
    await check_embedder_conformance(HashingEmbedder())
    await check_embedder_conformance(HashingEmbedder(64, char_ngrams=None, bigrams=False))


def test_vectors_are_unit_length_or_zero() -> None:
    embedder = HashingEmbedder()
    vector = embedder.vector("Kelpies are shape-shifting water spirits.")
    assert len(vector) == 512
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0)
    assert embedder.vector("") == (0.0,) * 512
    assert embedder.vector("the and of it") == (0.0,) * 512  # only stop words


def test_words_and_stems() -> None:
    assert words("The User's café — ÉCOLE_42, naïve!") == [
        "the",
        "users",
        "café",
        "école",
        "42",
        "naïve",
    ]
    assert [stem(w) for w in ["flies", "running", "baked", "bake", "bakes", "studies"]] == [
        "fly",
        "run",
        "bak",
        "bak",
        "bak",
        "study",
    ]
    assert [stem(w) for w in ["process", "processes", "status", "analysis", "meetings"]] == [
        "process",
        "process",
        "status",
        "analysis",
        "meet",
    ]
    assert stem("a42s") == "a42s" and stem("cat") == "cat"


def test_features() -> None:
    features = HashingEmbedder().features("Running dogs, running dogs!")
    assert features["w:run"] == pytest.approx(1.0 + math.log(2))  # twice: sublinear weight
    assert features["b:run dog"] == pytest.approx(0.3 * (1.0 + math.log(2)))
    assert "b:run dog" in features and "b:dog run" in features
    assert "c:<run" in features and "c:ogs>" in features
    assert not any(f.startswith("w:the") for f in HashingEmbedder().features("the dog"))
    plain = HashingEmbedder(char_ngrams=None, bigrams=False, stemming=False, stop_words=())
    assert list(plain.features("The dogs")) == ["w:the", "w:dogs"]
    assert list(HashingEmbedder(char_ngrams=(5, 5), bigrams=False).features("cat")) == [
        "w:cat",
        "c:<cat>",
    ]
    assert "and" in STOP_WORDS and "user" not in STOP_WORDS


def test_the_name_tells_vector_spaces_apart() -> None:
    assert HashingEmbedder().name == "kelpie-hashing-v1-512"
    assert HashingEmbedder(256).name == "kelpie-hashing-v1-256"
    custom = HashingEmbedder(bigrams=False).name
    assert (
        custom.startswith("kelpie-hashing-v1-512-")
        and custom != HashingEmbedder(stop_words=()).name
    )
    assert HashingEmbedder(bigrams=False).name == custom


@pytest.mark.parametrize(
    "text",
    [
        "",
        "the",
        "Running dogs, running dogs!",
        "aaaa aaaa bbb a",
        "\u6771\u4eac 42 x",
        PASSAGES["p05"],
    ],
)
@pytest.mark.parametrize("options", [{}, {"char_ngrams": (5, 5)}, {"stemming": False}])
def test_the_fast_vector_equals_the_sum_of_its_features(text: str, options: dict) -> None:  # type: ignore[type-arg]
    embedder = HashingEmbedder(64, **options)
    values = [0.0] * 64
    for feature, weight in embedder.features(text).items():
        index, sign = embedder._bucket(feature)
        values[index] += sign * weight
    norm = math.sqrt(sum(v * v for v in values))
    expected = [v / norm for v in values] if norm else values
    assert embedder.vector(text) == pytest.approx(expected, abs=1e-12)


def test_bad_arguments_are_one_line_errors() -> None:
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="dimensions must be a positive integer"):
            HashingEmbedder(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="char_ngrams"):
        HashingEmbedder(char_ngrams=(5, 3))
    with pytest.raises(TypeError, match="not a string"):
        HashingEmbedder(stop_words="the")
    with pytest.raises(TypeError, match="can only embed str"):
        HashingEmbedder().vector(42)  # type: ignore[arg-type]

    async def embed_a_string() -> None:
        await HashingEmbedder().embed("not a list")

    with pytest.raises(TypeError, match="sequence of texts, not a single string"):
        trio.run(embed_a_string)


def _index(embedder: HashingEmbedder) -> VectorIndex:
    index = VectorIndex(embedder.dimensions)
    for pid, text in PASSAGES.items():
        index.add(Passage(pid, text, embedder.vector(text)))
    return index


@pytest.mark.parametrize(("query", "expected"), QUERIES + MORE_QUERIES)
def test_a_paraphrase_ranks_its_passage_first(query: str, expected: str) -> None:
    embedder = HashingEmbedder()
    hits = _index(embedder).search(embedder.vector(query), top_k=3)
    ranking = [(h.passage.id, round(h.score, 3)) for h in hits]
    assert hits[0].passage.id == expected, f"{query!r}: {ranking}"
    assert hits[0].score > hits[1].score


def test_related_texts_score_higher_than_unrelated_ones() -> None:
    e = HashingEmbedder()
    base = e.vector("The database migration failed on a foreign key constraint")

    def cos(text: str) -> float:
        return sum(a * b for a, b in zip(base, e.vector(text), strict=True))

    assert cos("the migrations of the databases failed") > 0.4
    assert cos("Sarah's golden retriever likes swimming") < 0.1
    assert cos("databse migraton") > cos("swimming retriever")  # typos keep n-grams


def test_embedding_inside_the_simulator_is_the_same_and_touches_no_guard() -> None:
    texts = list(PASSAGES.values())
    outside = [HashingEmbedder().vector(t) for t in texts]

    async def main(sim: kelpie_dst.Simulation) -> list[tuple[float, ...]]:
        return await HashingEmbedder().embed(texts)

    result = kelpie_dst.run(main, seed=3, guards="strict")
    assert result.failure is None, result.failure
    assert result.value == outside
