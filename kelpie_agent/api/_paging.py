"""Cursor pagination the way letta-client iterates (docs/letta-compat.md, "Pagination").

List routes answer a bare JSON array. ``after``/``before`` are ids, relative to the requested
``order``: ``after=X`` gives the items that follow X in that order, ``before=X`` those that
precede it. With only ``before``, the ``limit`` items *closest* to X are returned (still in
the requested order), so the SDK's backward iteration (``before=<first id>``) visits every
item; otherwise the first ``limit`` items. A page past the end is empty, so iteration stops.
An unknown cursor is a 404 naming it. (The service pages its own lists the same way; this is
for the lists it returns whole: an agent's blocks and tools, a block's agents.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from ._errors import ApiError

__all__ = ["Order", "page"]

T = TypeVar("T")
Order = Literal["asc", "desc"]


def page(
    items: Sequence[T],
    ident: Callable[[T], str],
    *,
    after: str | None,
    before: str | None,
    limit: int,
    order: Order,
    what: str,
) -> list[T]:
    """One page of ``items`` (given oldest first)."""
    ordered = list(items) if order == "asc" else list(reversed(items))
    position = {ident(item): i for i, item in enumerate(ordered)}
    for name, cursor in (("after", after), ("before", before)):
        if cursor is not None and cursor not in position:
            raise ApiError(404, f"{name}: {what} {cursor!r} not found")
    low = position[after] + 1 if after is not None else 0
    high = position[before] if before is not None else len(ordered)
    window = ordered[low:high]
    if before is not None and after is None:
        return window[max(0, len(window) - limit) :]
    return window[:limit]
