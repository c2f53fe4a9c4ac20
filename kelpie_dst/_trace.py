"""The trace: every event that matters to behaviour, canonically encoded and hashed.

An event is ``(virtual time in ns, node, kind, fields)``. Its canonical encoding is msgpack of
``[time_ns, node, kind, fields]`` with the fields' keys sorted; the run's trace hash is blake2b
over the concatenated encodings, updated incrementally. Two runs of one seed are deterministic
exactly when their hashes match; when they do not, :func:`first_divergence` names the first event
that differs (design.md §1.4).

Besides the events that code emits, the trace covers every scheduling decision: the scheduler
appends the number of each task it runs to :attr:`Trace.ran`, and trio's deadline table appends
every timer armed to :attr:`Trace.timers`. Both are folded into the stream as one ``sched`` event
just before the next ordinary event (``ran``: task numbers in the order they ran, as given by the
``n`` field of ``task.spawn``; ``timers``: deadlines in virtual seconds). They cost a list
extend per batch of tasks and an append per timer, build no :class:`Event` and stay out of the
in-memory tail unless the trace is recorded.

A trace file is the plain concatenation of the encodings, optionally gzip-compressed (a path
ending in ``.gz``), so blake2b over its (decompressed) bytes *is* the run's trace hash.
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import io
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import attrs
import msgpack

from ._errors import UsageError

__all__ = [
    "Divergence",
    "Event",
    "Trace",
    "TraceFile",
    "decode_trace",
    "first_divergence",
    "load_trace",
    "open_trace_file",
    "read_trace",
]

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TAIL = 200
SCHED = "sched"  # the kind of the events that carry scheduling decisions
_SCHED_SHOWN = 8  # task numbers shown per sched event by Event.describe


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
        if self.kind == SCHED:
            fields = _describe_sched(self.fields)
        else:
            fields = " ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"#{self.index} t={self.time:.9f}s node={self.node} {self.kind} {fields}".rstrip()


def _describe_sched(fields: Mapping[str, Any]) -> str:
    """``ran=<count> [first numbers...] timers=<count>``: the lists can hold thousands."""
    parts = []
    for key in ("ran", "timers"):
        values = fields.get(key) or []
        shown = " ".join(str(v) for v in values[:_SCHED_SHOWN])
        more = " ..." if len(values) > _SCHED_SHOWN else ""
        parts.append(f"{key}={len(values)} [{shown}{more}]")
    return " ".join(parts)


def _canon(value: Any) -> Any:
    """A msgpack-encodable, address-free, order-stable form of ``value``."""
    if value is None or isinstance(value, bool | str | bytes):
        return value
    if isinstance(value, int):  # msgpack holds 64 bits; larger integers are kept as text
        return value if -(2**63) <= value < 2**64 else str(value)
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

    # Off only in bench/bench_trace_cost.py, to measure what the scheduling events cost.
    SCHEDULE = True

    def __init__(self, *, record: bool = False, file: IO[bytes] | None = None) -> None:
        self._hash = hashlib.blake2b(digest_size=16)
        self._packer = msgpack.Packer(use_bin_type=True)
        self.count = 0
        self.record = record
        self.events: list[Event] = []
        self.tail: collections.deque[Event] = collections.deque(maxlen=_TAIL)
        self._file = file
        self.kinds: collections.Counter[str] = collections.Counter()
        # Scheduling decisions since the last event (see the module docstring). The scheduler
        # and the deadline hook append to these very lists, so they are emptied in place.
        self.ran: list[int] = []
        self.timers: list[float] = []

    def emit(self, time: float, node: str, kind: str, fields: Mapping[str, Any]) -> None:
        time_ns = round(time * 1e9)
        if self.ran or self.timers:
            self._emit_sched(time_ns)
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

    def _sched_data(self, time_ns: int) -> bytes:
        event = [time_ns, "-", SCHED, {"ran": self.ran, "timers": self.timers}]
        return self._packer.pack(event)  # type: ignore[no-any-return]

    def _emit_sched(self, time_ns: int) -> None:
        """Fold the pending scheduling decisions into the stream as one ``sched`` event."""
        self._hash.update(data := self._sched_data(time_ns))
        if self._file is not None:
            self._file.write(data)
        if self.record:
            fields = {"ran": self.ran[:], "timers": self.timers[:]}
            self.events.append(Event(self.count, time_ns, "-", SCHED, fields))
        self.count += 1
        del self.ran[:], self.timers[:]

    def finish(self, time: float) -> None:
        """Fold in the decisions made since the last event (a stepped simulation's close)."""
        if self.ran or self.timers:
            self._emit_sched(round(time * 1e9))

    def hexdigest(self, time: float | None = None) -> str:
        """The hash so far. With ``time``, pending scheduling decisions are included as
        :meth:`finish` at that time would include them, without changing the stream."""
        if time is None or not (self.ran or self.timers):
            return self._hash.hexdigest()
        folded = self._hash.copy()
        folded.update(self._sched_data(round(time * 1e9)))
        return folded.hexdigest()


def open_trace_file(path: str | os.PathLike[str]) -> IO[bytes]:
    """A buffered binary sink for a trace file; gzip-compressed when ``path`` ends in ``.gz``
    (with a zero time stamp in the header, so one run always gives the same bytes)."""
    try:
        if not os.fspath(path).endswith(".gz"):
            return open(path, "wb", buffering=1 << 16)
        compressed = gzip.GzipFile(path, "wb", compresslevel=6, mtime=0)
    except OSError as error:
        why = error.strerror or str(error)
        raise UsageError(f"cannot write trace file {os.fspath(path)!r}: {why}") from None
    return io.BufferedWriter(compressed, 1 << 16)


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        why = error.strerror or str(error)
        raise UsageError(f"cannot read trace file {os.fspath(path)!r}: {why}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise UsageError(
                f"trace file {os.fspath(path)!r} is a damaged gzip file: {error}"
            ) from None
    return data


def read_trace(path: str | os.PathLike[str]) -> Iterator[Event]:
    """Events from a trace file written with ``trace_file=`` (plain or gzip-compressed)."""
    yield from decode_trace(_read_bytes(path))


def decode_trace(data: bytes) -> Iterator[Event]:
    """Events from the bytes of a trace stream."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    for index, (time_ns, node, kind, fields) in enumerate(unpacker):
        yield Event(index, time_ns, node, kind, fields)


@attrs.frozen
class TraceFile:
    """A trace loaded from a file: its events and its hash (equal to the run's trace hash)."""

    path: str
    events: list[Event] = attrs.field(eq=False, repr=False)
    trace_hash: str
    truncated: bool = False  # the file ends in the middle of an event (the prefix is loaded)

    @property
    def seed(self) -> int | None:
        """The seed, from the ``run.start`` event (``None`` if the trace has none)."""
        for event in self.events[:1]:
            if event.kind == "run.start" and isinstance(event.fields.get("seed"), int):
                return int(event.fields["seed"])
        return None

    @property
    def outcome(self) -> str | None:
        """``ok``, ``invariant``, ``liveness``, ... from ``run.end``; ``None`` if unfinished."""
        for event in self.events[-1:]:
            if event.kind == "run.end":
                return str(event.fields.get("outcome"))
        return None


def load_trace(path: str | os.PathLike[str]) -> TraceFile:
    """Load a trace file; a one-line :class:`UsageError` if it is missing or not a trace."""
    data = _read_bytes(path)
    if not data:
        raise UsageError(f"trace file {os.fspath(path)!r} is empty")
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    events: list[Event] = []
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    try:
        for index, item in enumerate(unpacker):
            time_ns, node, kind, fields = item
            if not (isinstance(time_ns, int) and isinstance(node, str) and isinstance(kind, str)):
                raise ValueError("not [time_ns, node, kind, fields]")
            if not isinstance(fields, dict):
                raise ValueError("fields are not a map")
            events.append(Event(index, time_ns, node, kind, fields))
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise UsageError(
            f"{os.fspath(path)!r} is not a kelpie_dst trace (event {len(events)}: {error})"
        ) from None
    return TraceFile(os.fspath(path), events, digest, truncated=unpacker.tell() != len(data))


@attrs.frozen
class Divergence:
    """The first event at which two traces differ (``None`` on a side that ended early), and
    the equal events just before it (``before``, oldest first)."""

    index: int
    left: Event | None
    right: Event | None
    before: tuple[Event, ...] = ()
    # for two ``sched`` events: where their decisions first differ, with task names
    detail: str = ""

    def describe(self, left_name: str = "run A", right_name: str = "run B") -> str:
        def side(event: Event | None) -> str:
            return event.describe() if event is not None else "<trace ended>"

        lines = [f"first divergent event at index {self.index}:"]
        if self.before:
            lines.append(f"  the {len(self.before)} equal events before it:")
            lines += [f"    {event.describe()}" for event in self.before]
        lines += [f"  {left_name}: {side(self.left)}", f"  {right_name}: {side(self.right)}"]
        if self.detail:
            lines.append(f"  {self.detail}")
        return "\n".join(lines)

    def changed_fields(self) -> list[str]:
        """``key: left != right`` for each field that differs, when only fields differ."""
        a, b = self.left, self.right
        if a is None or b is None or (a.time_ns, a.node, a.kind) != (b.time_ns, b.node, b.kind):
            return []
        keys = sorted(set(a.fields) | set(b.fields))
        missing = "<absent>"
        return [
            f"{k}: {a.fields.get(k, missing)!r} != {b.fields.get(k, missing)!r}"
            for k in keys
            if a.fields.get(k, missing) != b.fields.get(k, missing)
        ]


def first_divergence(
    left: Iterable[Event], right: Iterable[Event], *, context: int = 0
) -> Divergence | None:
    """The first index where the event streams differ, or ``None`` if they are identical;
    ``context`` equal events before it are kept in :attr:`Divergence.before`."""
    li, ri = iter(left), iter(right)
    recent: collections.deque[Event] = collections.deque(maxlen=max(context, 0) or None)
    names: dict[int, str] = {}  # task number -> name, from the task.spawn events so far
    index = 0
    while True:
        a = next(li, None)
        b = next(ri, None)
        if a is None and b is None:
            return None
        if (
            a is None
            or b is None
            or (a.time_ns, a.node, a.kind, a.fields) != (b.time_ns, b.node, b.kind, b.fields)
        ):
            detail = _sched_detail(a, b, names)
            return Divergence(index, a, b, tuple(recent) if context > 0 else (), detail)
        if a.kind == "task.spawn" and isinstance(a.fields.get("n"), int):
            names[a.fields["n"]] = str(a.fields.get("task"))
        if context > 0:
            recent.append(a)
        index += 1


def _sched_detail(a: Event | None, b: Event | None, names: Mapping[int, str]) -> str:
    """Where two ``sched`` events' decisions first differ, naming the tasks."""
    if a is None or b is None or a.kind != SCHED or b.kind != SCHED:
        return ""

    def task(n: object) -> str:
        return f"task {n} ({names.get(n, '?')})" if isinstance(n, int) else "no task (it ended)"

    for key in ("ran", "timers"):
        left, right = list(a.fields.get(key) or []), list(b.fields.get(key) or [])
        if left == right:
            continue
        at = next((i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y), None)
        if at is None:
            at = min(len(left), len(right))
        x = left[at] if at < len(left) else None
        y = right[at] if at < len(right) else None
        if key == "ran":
            return f"step {at} of this stretch ran {task(x)} in one run, {task(y)} in the other"
        return f"timer {at} of this stretch was armed for t={x} in one run, t={y} in the other"
    return ""
