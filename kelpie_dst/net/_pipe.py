"""One direction of a simulated TCP connection: ordered segments with arrival times.

A segment's arrival time is fixed when it is sent (latency, bandwidth, faults), or left open
while its link is partitioned or clogged and set when the link opens again. Readers wait for the
first segment's arrival; writers wait while the receiver's window is full.
"""

from __future__ import annotations

import collections
import errno
import math

import trio

__all__ = ["DATA", "FIN", "Pipe", "Segment"]

DATA = 0
FIN = 1


class Segment:
    __slots__ = ("arrival", "data", "kind")

    def __init__(self, kind: int, data: bytes, arrival: float | None) -> None:
        self.kind = kind
        self.data = data
        self.arrival = arrival


class Pipe:
    """Bytes flowing from one socket to its peer."""

    def __init__(self, window: int) -> None:
        self.segments: collections.deque[Segment] = collections.deque()
        self.window = window
        self.buffered = 0  # bytes sent but not yet read
        self.last_arrival = 0.0  # TCP delivers in order: nothing arrives before its predecessor
        self.reset = False
        self.reader_closed = False  # the receiving socket was closed locally
        self.writer_closed = False  # the sending socket was closed locally
        self._readable = trio.Event()
        self._writable = trio.Event()

    # -- sender side -------------------------------------------------------------------------
    def room(self) -> int:
        return max(0, self.window - self.buffered)

    def push(self, segment: Segment) -> None:
        if segment.arrival is not None:
            segment.arrival = max(segment.arrival, self.last_arrival)
            self.last_arrival = segment.arrival
        self.segments.append(segment)
        self.buffered += len(segment.data)
        self.wake_reader()

    def release_held(self, arrival: float) -> bool:
        """Give held segments (sent while the link was blocked) an arrival time."""
        released = False
        for segment in self.segments:
            if segment.arrival is None:
                segment.arrival = max(arrival, self.last_arrival)
                self.last_arrival = segment.arrival
                released = True
        if released:
            self.wake_reader()
        return released

    @property
    def holding(self) -> bool:
        return any(s.arrival is None for s in self.segments)

    async def wait_room(self) -> None:
        while True:
            if self.writer_closed:
                raise OSError(errno.EBADF, "Bad file descriptor")
            if self.reset or self.reader_closed:
                # The peer closed its socket: TCP answers further data with a reset.
                raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
            if self.room() > 0:
                return
            event = self._writable
            await event.wait()

    # -- receiver side -----------------------------------------------------------------------
    async def read(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` that have arrived, ``b""`` at EOF; waits for arrivals."""
        while True:
            if self.reader_closed:
                raise OSError(errno.EBADF, "Bad file descriptor")
            if self.reset:
                raise ConnectionResetError(errno.ECONNRESET, "connection reset by peer")
            now = trio.current_time()
            first = self.segments[0] if self.segments else None
            if first is not None and first.arrival is not None and first.arrival <= now:
                if first.kind == FIN:
                    return b""
                return self._take(max_bytes, now)
            deadline = math.inf
            if first is not None and first.arrival is not None:
                deadline = first.arrival
            event = self._readable
            with trio.move_on_at(deadline):
                await event.wait()

    def readable_now(self) -> bool:
        first = self.segments[0] if self.segments else None
        return self.reset or (
            first is not None and first.arrival is not None and first.arrival <= trio.current_time()
        )

    def _take(self, max_bytes: int, now: float) -> bytes:
        chunks = []
        size = 0
        while self.segments and size < max_bytes:
            segment = self.segments[0]
            if segment.kind != DATA or segment.arrival is None or segment.arrival > now:
                break
            want = max_bytes - size
            if len(segment.data) <= want:
                chunks.append(segment.data)
                size += len(segment.data)
                self.segments.popleft()
            else:
                chunks.append(segment.data[:want])
                segment.data = segment.data[want:]
                size += want
        self.buffered -= size
        self.wake_writer()
        return b"".join(chunks)

    # -- wakeups -------------------------------------------------------------------------------
    def wake_reader(self) -> None:
        self._readable.set()
        self._readable = trio.Event()

    def wake_writer(self) -> None:
        self._writable.set()
        self._writable = trio.Event()

    def break_(self) -> None:
        """The connection was reset: readers and writers fail from now on."""
        self.reset = True
        self.segments.clear()
        self.buffered = 0
        self.wake_reader()
        self.wake_writer()
