"""Dspeed-18: a SimKVStore verifies each stored frame once, and still catches every corruption."""

from __future__ import annotations

import pytest

from kelpie_agent.storage._errors import ChecksumError
from kelpie_dst.shims import _storage
from kelpie_dst.shims._storage import SimKVStore


@pytest.fixture(autouse=True)
def _every_frame_verified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_storage, "VERIFY_ONCE", 0)


def test_reads_give_the_written_values_and_corruption_is_still_caught() -> None:
    store = SimKVStore()
    store._apply([(b"a", b"one"), (b"b", b"two")])
    assert store._get(b"a") == b"one"
    assert store._get(b"a") == b"one"  # the verified frame again
    assert store._scan(b"", None, None, False) == [(b"a", b"one"), (b"b", b"two")]
    store.corrupt(b"a")  # a new frame object: verified again, and it fails
    with pytest.raises(ChecksumError):
        store._get(b"a")
    with pytest.raises(ChecksumError):
        store._scan(b"", None, None, False)
    store._apply([(b"a", b"healed")])
    assert store._get(b"a") == b"healed"
    store._apply([(b"a", None)])
    assert store._get(b"a") is None
    assert b"a" not in store._verified


def test_a_frame_changed_in_place_of_the_same_key_is_verified_again() -> None:
    store = SimKVStore()
    store._apply([(b"k", b"v1")])
    assert store._get(b"k") == b"v1"
    store._data[b"k"] = store._data[b"k"][:-1] + b"2"  # damaged frame, as a torn write leaves
    with pytest.raises(ChecksumError):
        store._get(b"k")


def test_small_frames_are_verified_at_every_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_storage, "VERIFY_ONCE", 1024)
    store = SimKVStore()
    store._apply([(b"s", b"small"), (b"l", b"L" * 2000)])
    assert store._get(b"s") == b"small"
    assert store._get(b"l") == b"L" * 2000
    assert list(store._verified) == [b"l"]
