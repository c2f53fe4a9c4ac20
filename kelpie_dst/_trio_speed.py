"""trio's per-cancel-scope deadline bookkeeping without a generator, while a simulation runs.

Every cancel scope (each ``move_on_after``, ``fail_after`` and ``sleep``: httpcore opens one
per socket read and write, the HTTP server one per read and write, the storage shim one per
delayed operation) enters and leaves ``CancelScope._might_change_registered_deadline``, a
``@contextmanager`` generator: a generator object, a ``_GeneratorContextManager`` and two
``next``/``throw`` trips per use, three uses per scope. Over HTTP that was about 2% of a seed.
:func:`fast_deadlines` swaps in :class:`_DeadlineChange`, the same ``finally`` block as a plain
context manager class (KI-protected like the original), and puts trio's own back afterwards.

It is the same code, so the same deadlines are registered in the same order and every trace
is unchanged. It is installed only if trio's method is, word for word, the one it copies
(:data:`_ORIGINAL`); any other trio release keeps its own.
"""

from __future__ import annotations

import contextlib
import inspect
import textwrap
from collections.abc import Iterator
from math import inf
from typing import Any

import trio
from trio._core._ki import enable_ki_protection

__all__ = ["fast_deadlines"]

_RUN: Any = trio._core._run

# trio 0.35's CancelScope._might_change_registered_deadline, which _DeadlineChange copies.
_ORIGINAL = """\
@contextmanager
@enable_ki_protection
def _might_change_registered_deadline(self) -> Iterator[None]:
    try:
        yield
    finally:
        old = self._registered_deadline
        if self._cancel_status is None or self._cancel_called:
            new = inf
        else:
            new = self._deadline
        if old != new:
            self._registered_deadline = new
            runner = GLOBAL_RUN_CONTEXT.runner
            if runner.is_guest:
                old_next_deadline = runner.deadlines.next_deadline()
            if old != inf:
                runner.deadlines.remove(old, self)
            if new != inf:
                runner.deadlines.add(new, self)
            if runner.is_guest:
                new_next_deadline = runner.deadlines.next_deadline()
                if old_next_deadline != new_next_deadline:
                    runner.force_guest_tick_asap()
"""


class _DeadlineChange:
    """``with scope._might_change_registered_deadline(): ...`` as a class (see the module)."""

    __slots__ = ("scope",)

    def __init__(self, scope: Any) -> None:
        self.scope = scope

    def __enter__(self) -> None:
        return None

    @enable_ki_protection
    def __exit__(self, *exc_info: object) -> None:
        scope = self.scope
        old = scope._registered_deadline
        new = inf if scope._cancel_status is None or scope._cancel_called else scope._deadline
        if old != new:
            scope._registered_deadline = new
            runner = _RUN.GLOBAL_RUN_CONTEXT.runner
            if runner.is_guest:
                old_next_deadline = runner.deadlines.next_deadline()
            if old != inf:
                runner.deadlines.remove(old, scope)
            if new != inf:
                runner.deadlines.add(new, scope)
            if runner.is_guest:
                new_next_deadline = runner.deadlines.next_deadline()
                if old_next_deadline != new_next_deadline:
                    runner.force_guest_tick_asap()


def _deadline_change(self: Any) -> _DeadlineChange:
    return _DeadlineChange(self)


def _matches(method: Any) -> bool:
    try:
        source = textwrap.dedent(inspect.getsource(method))
    except (OSError, TypeError):
        return False
    return source == _ORIGINAL


_USABLE: list[bool] = []  # whether trio's method is the one copied (checked once)


@contextlib.contextmanager
def fast_deadlines() -> Iterator[None]:
    """Use :class:`_DeadlineChange` for trio's cancel scopes while the block runs."""
    cls = trio.CancelScope
    original = cls.__dict__["_might_change_registered_deadline"]
    if not _USABLE:
        _USABLE.append(_matches(original))
    if not _USABLE[0]:
        yield
        return
    cls._might_change_registered_deadline = _deadline_change  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        cls._might_change_registered_deadline = original  # type: ignore[method-assign]
