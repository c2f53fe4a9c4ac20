"""Models for requests whose outcome a client may never learn.

Under faults a request ends in one of three ways (:class:`Outcome`): acknowledged (it was
applied), rejected (the server said it was not applied), or unknown (no answer, or an answer
that says it may have been applied). An unknown request may take effect now, later (after a
partition heals, a retry lands, a crashed node's work is resumed) or never. Checking a system
against a model is only honest if the model says exactly that, no more:

* :class:`Register`: a value overwritten by requests. It may hold the last acknowledged (or
  observed) value, or the value of any write whose outcome is unknown.
* :class:`ExactlyOnce`: items added by requests, each with its own identity (an ``otid``, a
  unique text). Every acknowledged item must be there exactly once, an unknown one at most
  once, and nothing else.

Both narrow what they allow when they observe the system (an unknown item seen is there for
good), and raise ``AssertionError`` naming what broke. Both are plain classes, independent of
the simulation: keep one in your state machine and feed it what the clients saw.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Generic, NoReturn, TypeVar

import attrs

__all__ = ["ExactlyOnce", "Outcome", "Register"]

T = TypeVar("T", bound=Hashable)


class Outcome(enum.Enum):
    """How a request ended, as far as its client knows."""

    OK = "ok"  # acknowledged: applied
    REJECTED = "rejected"  # refused: not applied, now or later
    UNKNOWN = "unknown"  # may have been applied, now or at any later time


def _shown(items: Iterable[object]) -> str:
    return "{" + ", ".join(sorted(map(repr, items))) + "}"


def _fail(message: str) -> NoReturn:
    # Raised, not asserted: a check must not vanish under ``python -O``.
    raise AssertionError(message)


@attrs.define
class Register(Generic[T]):
    """A value that requests overwrite: what it may hold now.

    ``values``: the last acknowledged or observed value (several after concurrent writes).
    ``pending``: values of writes whose outcome is unknown; any of them may land at any later
    time, so they stay allowed for good.
    """

    values: set[T]
    pending: set[T] = attrs.field(factory=set)

    @classmethod
    def of(cls, value: T) -> Register[T]:
        return cls({value})

    def allowed(self) -> set[T]:
        return self.values | self.pending

    def write(self, value: T, outcome: Outcome) -> None:
        self.write_concurrently([(value, outcome)])

    def write_concurrently(self, writes: Iterable[tuple[T, Outcome]]) -> None:
        """Writes whose requests overlapped in time: any acknowledged one may be the last."""
        writes = list(writes)
        acked = {value for value, outcome in writes if outcome is Outcome.OK}
        if acked:
            self.values = acked
        self.pending |= {value for value, outcome in writes if outcome is Outcome.UNKNOWN}

    def observe(self, value: T, what: str) -> None:
        """Check a read of the register (``what`` names it in the error), then narrow to it."""
        allowed = self.allowed()
        if value not in allowed:
            _fail(f"{what} is {value!r}, expected one of {_shown(allowed)}")
        self.values = {value}


@attrs.define
class ExactlyOnce(Generic[T]):
    """Items added by requests, each with an identity of its own.

    ``acked``: acknowledged, so present exactly once. ``unknown``: outcome unknown, so present
    at most once (an item seen once is acknowledged from then on).
    """

    acked: set[T] = attrs.field(factory=set)
    unknown: set[T] = attrs.field(factory=set)

    def add(self, item: T, outcome: Outcome) -> None:
        if outcome is Outcome.OK:
            self.acked.add(item)
            self.unknown.discard(item)
        elif outcome is Outcome.UNKNOWN and item not in self.acked:
            self.unknown.add(item)

    def observe_some(self, items: Iterable[T], what: str) -> None:
        """Check a partial view (a search, a page): nothing twice, nothing never sent."""
        seen = Counter(items)
        twice = [item for item, n in seen.items() if n > 1]
        if twice:
            _fail(f"{what}: {_shown(twice)} present more than once")
        stray = set(seen) - self.acked - self.unknown
        if stray:
            _fail(f"{what}: {_shown(stray)} present, but never sent")
        self.acked |= self.unknown & set(seen)
        self.unknown -= set(seen)

    def observe_all(self, items: Iterable[T], what: str) -> None:
        """Check the complete contents: as :meth:`observe_some`, and nothing acknowledged is
        missing."""
        items = list(items)
        missing = self.acked - set(items)
        self.observe_some(items, what)
        if missing:
            _fail(f"{what}: acknowledged {_shown(missing)} missing")
