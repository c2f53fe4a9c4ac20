"""The trace: every event that matters to behaviour, canonically encoded and hashed.

An event is ``(virtual time in ns, node, kind, fields)``. Its canonical encoding is msgpack of
``[time_ns, node, kind, fields]`` with the fields' keys sorted; the run's trace hash is blake2b
over the concatenated encodings, updated incrementally. Two runs of one seed are deterministic
exactly when their hashes match; when they do not, :func:`first_divergence` names the first event
that differs (design.md §1.4).
"""

from __future__ import annotations

import collections
import hashlib
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
import msgpack

__all__ = ["Divergence", "Event", "Trace", "decode_trace", "first_divergence", "read_trace"]

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TAIL = 200


@attrs.frozen
class Event:
    """One trace event."""

    index: int
    time_ns: int
    node: str
    kind: str
    fields: Mapping[str, Any]

    @property
    def time(self) -> float:
        return self.time_ns / 1e9

    def describe(self) -> str:
        fields = " ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"#{self.index} t={self.time:.9f}s node={self.node} {self.kind} {fields}".rstrip()


def _canon(value: Any) -> Any:
    """A msgpack-encodable, address-free, order-stable form of ``value``."""
    if value is None or isinstance(value, bool | int | str | bytes):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    return _ADDRESS.sub("", repr(value))


def sanitize(text: str) -> str:
    """Strip memory addresses (``<... at 0x7f...>``), which differ between processes."""
    return _ADDRESS.sub("", text)


class Trace:
    """Appends events, hashes them incrementally, and optionally records or streams them."""

    def __init__(self, *, record: bool = False, file: IO[bytes] | None = None) -> None:
        self._hash = hashlib.blake2b(digest_size=16)
        self._packer = msgpack.Packer(use_bin_type=True)
        self.count = 0
        self.record = record
        self.events: list[Event] = []
        self.tail: collections.deque[Event] = collections.deque(maxlen=_TAIL)
        self._file = file
        self.kinds: collections.Counter[str] = collections.Counter()

    def emit(self, time: float, node: str, kind: str, fields: Mapping[str, Any]) -> None:
        time_ns = round(time * 1e9)
        canon = _canon(fields)
        data = self._packer.pack([time_ns, node, kind, canon])
        self._hash.update(data)
        if self._file is not None:
            self._file.write(data)
        event = Event(self.count, time_ns, node, kind, canon)
        self.tail.append(event)
        if self.record:
            self.events.append(event)
        self.count += 1
        self.kinds[kind] += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def read_trace(path: str | Path) -> Iterator[Event]:
    """Events from a trace file written with ``trace_file=``."""
    with open(path, "rb") as f:
        yield from decode_trace(f.read())


def decode_trace(data: bytes) -> Iterator[Event]:
    """Events from the bytes of a trace stream."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    for index, (time_ns, node, kind, fields) in enumerate(unpacker):
        yield Event(index, time_ns, node, kind, fields)


@attrs.frozen
class Divergence:
    """The first event at which two traces differ (``None`` on a side that ended early)."""

    index: int
    left: Event | None
    right: Event | None

    def describe(self, left_name: str = "run A", right_name: str = "run B") -> str:
        def side(event: Event | None) -> str:
            return event.describe() if event is not None else "<trace ended>"

        return (
            f"first divergent event at index {self.index}:\n"
            f"  {left_name}: {side(self.left)}\n"
            f"  {right_name}: {side(self.right)}"
        )


def first_divergence(left: Iterable[Event], right: Iterable[Event]) -> Divergence | None:
    """The first index where the event streams differ, or ``None`` if they are identical."""
    li, ri = iter(left), iter(right)
    index = 0
    while True:
        a = next(li, None)
        b = next(ri, None)
        if a is None and b is None:
            return None
        if (
            a is None
            or b is None
            or (a.time_ns, a.node, a.kind, a.fields)
            != (
                b.time_ns,
                b.node,
                b.kind,
                b.fields,
            )
        ):
            return Divergence(index, a, b)
        index += 1
