"""VectorIndex: cosine ranking, top-k, tie-breaking, tag and date filters, bad input."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from kelpie_agent.embeddings import HashingEmbedder, Passage, VectorIndex, to_epoch_seconds

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY = 86_400.0


def unit(*coords: float) -> tuple[float, ...]:
    return tuple(coords)


def make_index() -> VectorIndex:
    index = VectorIndex(3)
    index.add(Passage("a", "x axis", unit(1, 0, 0), tags=["work"], created_at=T0))
    index.add(Passage("b", "mostly x", unit(2, 1, 0), tags=["work", "urgent"], created_at=T0 + DAY))
    index.add(Passage("c", "y axis", unit(0, 1, 0), tags=["home"], created_at=T0 + 2 * DAY))
    index.add(Passage("d", "minus x", unit(-1, 0, 0), tags=[], created_at=T0 + 3 * DAY))
    index.add(Passage("e", "zero", unit(0, 0, 0), tags=["home", "urgent"], created_at=T0 + 4 * DAY))
    return index


def ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.passage.id for h in hits]


def test_cosine_ranking_and_scores() -> None:
    hits = make_index().search(unit(1, 0, 0), top_k=None)
    assert ids(hits) == ["a", "b", "c", "e", "d"]  # c and e tie at 0: by id
    assert [round(h.score, 6) for h in hits] == [1.0, round(2 / math.sqrt(5), 6), 0.0, 0.0, -1.0]
    assert ids(make_index().search(unit(3, 0, 0), top_k=2)) == ["a", "b"]  # scale-free
    assert make_index().search(unit(1, 0, 0), top_k=0) == []


def test_ties_break_by_id_whatever_the_insertion_order() -> None:
    for order in (["p3", "p1", "p2"], ["p2", "p3", "p1"]):
        index = VectorIndex(2)
        for pid in order:
            index.add(Passage(pid, pid, (0.6, 0.8)))
        assert ids(index.search((1.0, 0.0), top_k=2)) == ["p1", "p2"]
        assert ids(index.search((0.0, 0.0), top_k=None)) == ["p1", "p2", "p3"]


def test_tag_filters() -> None:
    index = make_index()
    q = unit(1, 0, 0)
    assert ids(index.search(q, tags=["urgent", "home"], top_k=None)) == ["b", "c", "e"]
    assert ids(index.search(q, tags=["urgent", "home"], tag_match_mode="all", top_k=None)) == ["e"]
    assert ids(index.search(q, tags=["work"], tag_match_mode="all", top_k=None)) == ["a", "b"]
    assert len(index.search(q, tags=[], top_k=None)) == 5  # no tags: no filter
    assert len(index.search(q, tags=None, tag_match_mode="all", top_k=None)) == 5
    assert index.search(q, tags=["nope"], top_k=None) == []


def test_date_range_is_inclusive_and_takes_aware_datetimes() -> None:
    index = make_index()
    q = unit(1, 0, 0)
    assert ids(index.search(q, start=T0 + DAY, end=T0 + 3 * DAY, top_k=None)) == ["b", "c", "d"]
    start = datetime(2026, 1, 2, tzinfo=UTC)
    end = datetime(2026, 1, 3, 1, tzinfo=timezone(timedelta(hours=1)))  # == Jan 3 00:00 UTC
    assert ids(index.search(q, start=start, end=end, top_k=None)) == ["b", "c"]
    assert ids(index.search(q, start=T0 + 3 * DAY, top_k=None)) == ["e", "d"]
    assert ids(index.search(q, end=T0, top_k=None)) == ["a"]
    both = index.search(q, tags=["urgent"], start=T0 + 2 * DAY, top_k=None)
    assert ids(both) == ["e"]


def test_passages_accept_datetimes_and_normalise_fields() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    passage = Passage("x", "text", [1, 2], tags=("b", "a", "b"), created_at=when)
    assert passage.created_at == T0
    assert passage.tags == frozenset({"a", "b"})
    assert passage.vector == (1.0, 2.0)
    assert to_epoch_seconds(5) == 5.0


def test_bad_input_gets_one_line_errors() -> None:
    index = make_index()
    q = unit(1, 0, 0)
    with pytest.raises(ValueError, match="tag_match_mode must be 'any' or 'all', got 'some'"):
        index.search(q, tags=["work"], tag_match_mode="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="query vector has 2 dimensions; this index holds 3"):
        index.search((1.0, 0.0))
    with pytest.raises(ValueError, match="top_k must be a non-negative integer"):
        index.search(q, top_k=-1)
    with pytest.raises(ValueError, match="date range is empty"):
        index.search(q, start=T0 + DAY, end=T0)
    with pytest.raises(ValueError, match="has no timezone"):
        index.search(q, start=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="has no timezone"):
        Passage("x", "t", [1.0], created_at=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="not the string 'work'"):
        index.search(q, tags="work")
    with pytest.raises(TypeError, match="tags must be strings"):
        Passage("x", "t", [1.0], tags=[1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="epoch seconds or an aware datetime"):
        Passage("x", "t", [1.0], created_at="2026-01-01")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="passage 'y' has a 2-dimensional vector"):
        index.add(Passage("y", "t", [1.0, 0.0]))
    with pytest.raises(ValueError, match="dimensions must be a positive integer"):
        VectorIndex(0)


def test_add_replaces_remove_get_iterate() -> None:
    index = make_index()
    index.add(Passage("a", "now y", unit(0, 1, 0)))
    assert len(index) == 5 and "a" in index
    assert index.get("a") is not None and index.get("a").text == "now y"  # type: ignore[union-attr]
    assert ids(index.search(unit(0, 1, 0), top_k=2)) == ["a", "c"]
    assert index.remove("a") and not index.remove("a")
    assert index.get("a") is None and "a" not in index
    assert [p.id for p in index] == ["b", "c", "d", "e"]


def test_search_over_real_embeddings_with_filters() -> None:
    e = HashingEmbedder()
    index = VectorIndex(e.dimensions)
    notes = [
        ("n1", "Dentist appointment on Monday at 10am", ["health"], T0),
        ("n2", "Dentist said to floss more", ["health"], T0 + 10 * DAY),
        ("n3", "Appointment with the bank about the mortgage", ["money"], T0 + 20 * DAY),
    ]
    for pid, text, tags, at in notes:
        index.add(Passage(pid, text, e.vector(text), tags=tags, created_at=at))
    q = e.vector("dentist appointment")
    assert ids(index.search(q, top_k=3)) == ["n1", "n2", "n3"]
    assert ids(index.search(q, start=T0 + DAY, top_k=3)) == ["n2", "n3"]
    assert ids(index.search(q, tags=["money"], top_k=3)) == ["n3"]
