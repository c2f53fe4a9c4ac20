"""History records: what each client invoked, when, and what it observed.

A history is a sequence of :class:`Operation` values. Each one is a complete record of one client
call: its invocation, and either its response (``output`` plus ``response_time``) or the fact that
the client never learned the outcome (``output is UNKNOWN`` and ``response_time == inf``: the call
may have taken effect at any moment after it was invoked, or never).

:class:`HistoryRecorder` builds such a history from Jepsen-style events (``invoke`` then one of
``ok`` / ``fail`` / ``info``). Times are always passed in by the caller: nothing here reads a clock.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable
from typing import Final, TypeAlias

import attrs

__all__ = [
    "UNKNOWN",
    "HistoryRecorder",
    "Key",
    "MalformedHistoryError",
    "OpHandle",
    "OpKind",
    "Operation",
    "Unknown",
]

Key: TypeAlias = bytes | str
"""A key of the key-value store under test."""


class MalformedHistoryError(ValueError):
    """A history record is inconsistent (for example a response before its invocation)."""


class OpKind(enum.StrEnum):
    """What an operation does to its key."""

    READ = "read"
    WRITE = "write"
    CAS = "cas"
    DELETE = "delete"


class Unknown(enum.Enum):
    """Type of :data:`UNKNOWN`, the output of an operation whose outcome was never learned."""

    UNKNOWN = "unknown"

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = Unknown.UNKNOWN
"""Output of an operation whose client never learned the outcome (timeout, crash)."""


def _to_kind(kind: OpKind | str) -> OpKind:
    try:
        return OpKind(kind)
    except ValueError:
        allowed = ", ".join(k.value for k in OpKind)
        raise MalformedHistoryError(
            f"unknown operation kind {kind!r} (expected {allowed})"
        ) from None


def _to_time(time: float) -> float:
    return float(time)


def _show_process(process: int | str) -> str:
    return f"p{process}" if isinstance(process, int) else process


@attrs.frozen(kw_only=True)
class Operation:
    """One client call on one key, from invocation to response.

    ``value`` is the value written (``write``) or the new value (``cas``); ``expected`` is the value
    a ``cas`` compares against (``None`` means "the key is absent"). ``output`` is what the client
    observed: the value read (``None`` for an absent key), ``True``/``False`` for whether a ``cas``
    took effect, ``None`` for an acknowledged ``write``/``delete``, or :data:`UNKNOWN`.
    """

    process: int | str
    kind: OpKind = attrs.field(converter=_to_kind)
    key: Key
    value: Hashable = None
    expected: Hashable = None
    output: Hashable = None
    invoke_time: float = attrs.field(converter=_to_time)
    response_time: float = attrs.field(converter=_to_time)

    def __attrs_post_init__(self) -> None:
        problem = self._problem()
        if problem is not None:
            raise MalformedHistoryError(f"{problem}: {self.describe()}")

    def _problem(self) -> str | None:
        key: object = self.key  # typed as Key, but histories come from outside
        if not isinstance(key, bytes | str):
            return f"key must be bytes or str, not {type(key).__name__}"
        for name in ("value", "expected", "output"):
            if not isinstance(getattr(self, name), Hashable):
                return f"{name} must be hashable"
        if math.isnan(self.invoke_time) or math.isnan(self.response_time):
            return "times must not be NaN"
        if math.isinf(self.invoke_time):
            return f"invoke time must be finite, not {self.invoke_time}"
        if self.response_time < self.invoke_time:
            return (
                f"response time {self.response_time!r} is before invoke time {self.invoke_time!r}"
            )
        if self.output is UNKNOWN:
            if self.response_time != math.inf:
                return "an operation with UNKNOWN output must have response time inf"
        elif self.response_time == math.inf:
            return "an operation with response time inf must have UNKNOWN output"
        if self.kind is OpKind.CAS and not (
            self.output is UNKNOWN or isinstance(self.output, bool)
        ):
            return f"cas output must be True, False or UNKNOWN, not {self.output!r}"
        if self.kind in (OpKind.WRITE, OpKind.DELETE) and self.output not in (None, UNKNOWN):
            return f"{self.kind} output must be None or UNKNOWN, not {self.output!r}"
        return None

    @property
    def unknown(self) -> bool:
        """Whether the client never learned the outcome of this operation."""
        return self.output is UNKNOWN

    def describe(self) -> str:
        """One line, e.g. ``p2 read 'x' -> 'b' at [3.0, 4.0]``."""
        return f"{_show_process(self.process)} {self.action()} at {self.interval()}"

    def action(self) -> str:
        """What the operation did, e.g. ``read 'x' -> 'b'`` or ``cas 'x' from 1 to 2 -> ok``."""
        out = self.output
        if self.kind is OpKind.READ:
            return f"read {self.key!r} -> {'?' if out is UNKNOWN else repr(out)}"
        if self.kind is OpKind.WRITE:
            return f"write {self.key!r} := {self.value!r}"
        if self.kind is OpKind.DELETE:
            return f"delete {self.key!r}"
        result = "?" if out is UNKNOWN else ("ok" if out else "failed")
        return f"cas {self.key!r} from {self.expected!r} to {self.value!r} -> {result}"

    def interval(self) -> str:
        """``[invoke, response]``, or ``[invoke, ?) (outcome unknown)``."""
        if self.output is UNKNOWN:
            return f"[{self.invoke_time!r}, ?) (outcome unknown)"
        return f"[{self.invoke_time!r}, {self.response_time!r}]"


@attrs.frozen
class OpHandle:
    """Returned by :meth:`HistoryRecorder.invoke`; pass it to ``ok``, ``fail`` or ``info``."""

    id: int


@attrs.frozen
class _Invocation:
    process: int | str
    kind: OpKind
    key: Key
    value: Hashable
    expected: Hashable
    time: float


@attrs.define
class HistoryRecorder:
    """Builds a history from Jepsen-style events; the caller supplies every timestamp.

    >>> rec = HistoryRecorder()
    >>> h = rec.invoke(1, "write", "x", value="a", time=0.0)
    >>> rec.ok(h, time=1.0)
    >>> [op.describe() for op in rec.history()]
    ["p1 write 'x' := 'a' at [0.0, 1.0]"]
    """

    _pending: dict[int, _Invocation] = attrs.field(factory=dict, init=False)
    _done: dict[int, Operation | None] = attrs.field(factory=dict, init=False)
    _next_id: int = attrs.field(default=0, init=False)

    def invoke(
        self,
        process: int | str,
        kind: OpKind | str,
        key: Key,
        *,
        value: Hashable = None,
        expected: Hashable = None,
        time: float,
    ) -> OpHandle:
        """Record that ``process`` invoked an operation at ``time``."""
        handle = OpHandle(self._next_id)
        self._next_id += 1
        inv = _Invocation(process, _to_kind(kind), key, value, expected, float(time))
        self._operation(inv, UNKNOWN, math.inf)  # validate now, where the caller can see it
        self._pending[handle.id] = inv
        return handle

    def ok(self, handle: OpHandle, output: Hashable = None, *, time: float) -> None:
        """The operation completed at ``time`` and the client observed ``output``."""
        self._complete(handle, output, time)

    def fail(self, handle: OpHandle) -> None:
        """The operation definitely did not take effect: it is left out of the history."""
        self._invocation(handle)
        del self._pending[handle.id]
        self._done[handle.id] = None

    def info(self, handle: OpHandle) -> None:
        """The outcome is unknown: it may take effect at any point after invocation, or never."""
        self._complete(handle, UNKNOWN, math.inf)

    def history(self) -> tuple[Operation, ...]:
        """The operations, in the order `invoke` was called; still-pending ones count as unknown."""
        ops: list[Operation] = []
        for op_id in range(self._next_id):
            if op_id in self._pending:
                ops.append(self._operation(self._pending[op_id], UNKNOWN, math.inf))
                continue
            op = self._done[op_id]
            if op is not None:
                ops.append(op)
        return tuple(ops)

    def _invocation(self, handle: OpHandle) -> _Invocation:
        inv = self._pending.get(handle.id)
        if inv is None:
            raise MalformedHistoryError(
                f"operation handle {handle.id} is not pending (already completed, or not ours)"
            )
        return inv

    def _complete(self, handle: OpHandle, output: Hashable, time: float) -> None:
        op = self._operation(self._invocation(handle), output, time)  # validate, then commit
        del self._pending[handle.id]
        self._done[handle.id] = op

    @staticmethod
    def _operation(inv: _Invocation, output: Hashable, time: float) -> Operation:
        return Operation(
            process=inv.process,
            kind=inv.kind,
            key=inv.key,
            value=inv.value,
            expected=inv.expected,
            output=output,
            invoke_time=inv.time,
            response_time=time,
        )
