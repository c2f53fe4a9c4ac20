"""The list-order oracle (``_list_order``): a listing sorted by ``created_at`` then id, as it
reports them, passes both ways; items sorted by id alone, equal times out of id order, a
``desc`` listing that is not reversed, and a missing ``created_at`` are each caught."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kelpie_dst.workloads._list_order import check_sorted

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# run ids are random: "r-b" was made first, then "r-a", then "r-c" and "r-d" at one instant
MADE = [("r-b", at(1)), ("r-a", at(2)), ("r-c", at(3)), ("r-d", at(3))]


def test_a_listing_sorted_by_what_it_reports_passes_both_ways() -> None:
    assert check_sorted("a1 runs", "asc", MADE) == []
    assert check_sorted("a1 runs", "desc", MADE[::-1]) == []
    assert check_sorted("a1 runs", "asc", []) == []


def test_a_listing_sorted_by_id_alone_is_caught() -> None:
    by_id = sorted(MADE)
    problems = check_sorted("a1 runs", "asc", by_id)
    assert len(problems) == 1
    assert "r-b (created_at 2026-01-01T00:00:01+00:00) comes after r-a" in problems[0]


def test_equal_times_out_of_id_order_are_caught() -> None:
    swapped = [MADE[0], MADE[1], MADE[3], MADE[2]]
    assert "r-c" in check_sorted("agents", "asc", swapped)[0]
    assert check_sorted("agents", "desc", [MADE[2], MADE[3], MADE[1], MADE[0]]) != []


def test_a_desc_listing_in_asc_order_is_caught() -> None:
    assert "read desc" in check_sorted("a2 conversations", "desc", MADE)[0]


def test_a_missing_created_at_is_caught() -> None:
    assert check_sorted("a1 runs", "asc", [("r-b", at(1)), ("r-x", None)]) == [
        "a1 runs read asc: no created_at on ['r-x']"
    ]
