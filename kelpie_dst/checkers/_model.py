"""Sequential specifications that the linearizability checker compares histories against."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, TypeAlias, TypeVar

import attrs

from ._history import UNKNOWN, Key, Operation, OpKind

__all__ = ["KVModel", "KVState", "Model"]

S = TypeVar("S", bound=Hashable)


class Model(Protocol[S]):
    """A sequential object: an initial state and a deterministic, pure transition function.

    States must be hashable, and equal states must behave the same: the checker memoizes on
    them. ``step`` must be deterministic and depend only on its arguments, and it must accept an
    operation whose output is :data:`UNKNOWN` whenever the operation could have been applied,
    returning the state it leads to.
    """

    def init(self) -> S:
        """The state before any operation."""
        ...

    def step(self, state: S, op: Operation) -> tuple[bool, S]:
        """Apply ``op`` to ``state``: whether its output is possible there, and the next state."""
        ...

    def read_only(self, op: Operation) -> bool:
        """Whether ``op`` leaves every state in which it is accepted unchanged.

        The checker linearizes such operations as soon as they are possible, without trying the
        alternatives, which prunes the search a lot, and leaves them out altogether when their
        outcome is unknown. Returning False is always safe.
        """
        ...

    def describe_state(self, state: S) -> str:
        """A short human-readable rendering of ``state``."""
        ...

    def explain(self, state: S, op: Operation) -> str:
        """Why ``step(state, op)`` is rejected; completes the sentence "<op> but ..."."""
        ...


KVState: TypeAlias = tuple[tuple[Key, Hashable], ...]
"""Present keys and their values, sorted by key; an absent key reads as ``None``."""


def _sort_key(item: tuple[Key, Hashable]) -> tuple[bool, Key]:
    return isinstance(item[0], bytes), item[0]


def _get(state: KVState, key: Key) -> Hashable:
    for k, v in state:
        if type(k) is type(key) and k == key:
            return v
    return None


def _put(state: KVState, key: Key, value: Hashable) -> KVState:
    if not state or (len(state) == 1 and type(state[0][0]) is type(key) and state[0][0] == key):
        return () if value is None else ((key, value),)  # the common case: one key per search
    rest = [(k, v) for k, v in state if not (type(k) is type(key) and k == key)]
    if value is not None:
        rest.append((key, value))
        rest.sort(key=_sort_key)
    return tuple(rest)


class _Unobserved:
    """Stands for any value that no operation of a history could tell apart from another."""

    def __repr__(self) -> str:
        return "<unobserved value>"


_UNOBSERVED = _Unobserved()


@attrs.frozen
class KVModel:
    """A map of registers with ``read``, ``write``, ``cas`` and ``delete``.

    A missing key reads as ``None``; writing ``None`` is the same as deleting. A ``cas`` with
    output ``True`` must find ``expected`` and installs ``value``; with output ``False`` it must
    find something else and changes nothing; with output :data:`UNKNOWN` it does whichever of
    the two the state dictates.
    """

    def init(self) -> KVState:
        return ()

    def step(self, state: KVState, op: Operation) -> tuple[bool, KVState]:
        kind = op.kind
        if kind is OpKind.READ:
            out = op.output
            return (out is UNKNOWN or out == _get(state, op.key)), state
        if kind is OpKind.WRITE:
            return True, _put(state, op.key, op.value)
        if kind is OpKind.DELETE:
            return True, _put(state, op.key, None)
        current = _get(state, op.key)
        out = op.output
        matches = bool(current == op.expected)
        if out is UNKNOWN or out is matches:
            return True, (_put(state, op.key, op.value) if matches else state)
        return False, state

    def anonymize(self, ops: Sequence[Operation]) -> list[Operation]:
        """``ops`` with every value that no read returns and no cas expects made one and the same.

        No operation can tell such values apart (reads and cas only compare against observed
        values), so the verdict is unchanged while the search meets fewer distinct states. The
        checker applies this on its own before searching a key.
        """
        observed: set[Hashable] = {None}
        for op in ops:
            if op.kind is OpKind.READ and not op.unknown:
                observed.add(op.output)
            elif op.kind is OpKind.CAS:
                observed.add(op.expected)
        return [
            attrs.evolve(op, value=_UNOBSERVED)
            if op.kind in (OpKind.WRITE, OpKind.CAS) and op.value not in observed
            else op
            for op in ops
        ]

    def read_only(self, op: Operation) -> bool:
        if op.kind is OpKind.READ:
            return True
        if op.kind is OpKind.CAS:  # a cas that failed, or that replaces a value by itself
            return op.output is False or bool(op.expected == op.value)
        return False

    def describe_state(self, state: KVState) -> str:
        if not state:
            return "(all keys absent)"
        return ", ".join(f"{k!r} = {v!r}" for k, v in state)

    def explain(self, state: KVState, op: Operation) -> str:
        current = _get(state, op.key)
        if current is None:
            where = f"{op.key!r} is absent in the model (reads as None)"
        else:
            where = f"the model value of {op.key!r} is {current!r}"
        if op.kind is OpKind.CAS and op.output is True:
            return f"{where}, not the expected {op.expected!r}"
        if op.kind is OpKind.CAS and op.output is False:
            return f"{where}, equal to the expected value, so the cas would have succeeded"
        return where
