"""The conflict tracker that SimKV and SqliteKV validate transactions with: pruning its memory
of recent writes never forgets one that a still-open transaction needs.

Checked against a model (for each open transaction, every key written after it began) over
random interleavings of begins, commits and ends, with the smallest pruning threshold, where
pruning runs at nearly every end; and one hand-written case that needs two transactions open
at different versions.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kelpie_agent.storage._occ import ConflictTracker

KEYS = [b"a", b"b", b"c", b"d"]

ops = st.lists(
    st.one_of(
        st.just(("begin",)),
        st.tuples(st.just("record"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
        st.tuples(st.just("end"), st.integers(min_value=0, max_value=50)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops, st.sampled_from([1, 2, 4, 1024]))
def test_pruning_never_forgets_a_write_an_open_transaction_needs(
    program: list[tuple[object, ...]], min_prune: int
) -> None:
    tracker = ConflictTracker(min_prune)
    open_txns: list[tuple[int, set[bytes]]] = []  # (start version, keys written since)
    for op in program:
        if op[0] == "begin":
            open_txns.append((tracker.begin(), set()))
        elif op[0] == "record":
            keys = op[1]
            assert isinstance(keys, list)
            tracker.record(keys)
            for _, written in open_txns:
                written.update(keys)
        elif open_txns:
            index = op[1]
            assert isinstance(index, int)
            start, _ = open_txns.pop(index % len(open_txns))
            tracker.end(start)
        for start, written in open_txns:
            for key in KEYS:
                assert tracker.key_changed(start, key) == (key in written), (start, key)
            assert tracker.range_changed(start, b"a", b"c") == bool(written & {b"a", b"b"})


def test_a_long_transaction_keeps_its_conflicts_while_a_newer_one_ends() -> None:
    tracker = ConflictTracker(min_prune=1)
    old = tracker.begin()
    tracker.record([b"a"])  # after old began
    middle = tracker.begin()
    tracker.record([b"b"])
    tracker.end(tracker.begin())  # prunes: only what neither old nor middle needs
    assert tracker.key_changed(old, b"a") and tracker.key_changed(old, b"b")
    assert not tracker.key_changed(middle, b"a") and tracker.key_changed(middle, b"b")


def test_a_pruning_threshold_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="min_prune"):
        ConflictTracker(0)
