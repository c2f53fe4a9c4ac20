"""The agent records' msgpack codec: round trips, and records of another version still load."""

from __future__ import annotations

import msgpack
import pytest

from kelpie_agent.agent._codec import pack, unpack
from kelpie_agent.agent._models import DEFAULT_BLOCK_LIMIT, Block


def _block(**changes: object) -> Block:
    fields: dict[str, object] = {"id": "block-1", "label": "human", "value": "Ada"}
    fields.update(changes)
    return Block(**fields)  # type: ignore[arg-type]


def _rewrite(data: bytes, edit: dict[str, object], drop: tuple[str, ...] = ()) -> bytes:
    raw = msgpack.unpackb(data, raw=False)
    for name in drop:
        del raw[name]
    raw.update(edit)
    out: bytes = msgpack.packb(raw, use_bin_type=True)
    return out


def test_a_record_round_trips() -> None:
    block = _block(metadata={"k": [1, {"x": None}]}, limit=7)
    assert unpack(pack(block)) == block


def test_nested_records_and_plain_maps_round_trip() -> None:
    value = {"blocks": [_block(), _block(id="block-2", label="persona")], "n": 3, "m": {}}
    assert unpack(pack(value)) == value


def test_a_field_this_version_lacks_is_ignored() -> None:
    block = _block()
    newer = _rewrite(pack(block), {"colour": "red", "pinned": True})
    assert unpack(newer) == block


def test_a_missing_field_takes_its_default() -> None:
    older = _rewrite(pack(_block(limit=9)), {}, drop=("limit", "description"))
    assert unpack(older) == _block(limit=DEFAULT_BLOCK_LIMIT)


def test_an_unknown_record_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown record type 'gizmo'"):
        unpack(msgpack.packb({"_t": "gizmo", "id": "x"}, use_bin_type=True))
