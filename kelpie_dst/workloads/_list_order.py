"""A list sorted by a field the API reports is sorted by the values it reports.

Letta lists runs, agents and conversations by ``created_at`` (then by id, for equal times),
oldest first with ``order=asc`` and newest first with ``desc``. Whatever clock made the
times (under clock skew an agent's later run can carry an earlier time: Dlead7-3), the items
of one listing must be in the order of the ``created_at`` values *that same listing shows*:
a client that sorts what it was given must get what it was given. So, for every listing read
in one page (both directions):

* ``asc``: each item's ``(created_at, id)`` is greater than the one before it;
* ``desc``: smaller.

Lists in another order (blocks and tools in attachment order, passages and messages in the
order they were stored) are not checked here: ``created_at`` is not their sort key.

:func:`check_sorted` is the pure checker (``tests/workloads/test_list_order.py``); the list
walker (``_agent_lists``) feeds it each one-page listing it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

__all__ = ["BY_CREATED_AT", "Stamped", "check_sorted"]

BY_CREATED_AT = frozenset(["runs", "agents", "conversations"])
"""The walked lists whose order is ``created_at``, then id."""

Stamped = tuple[str, datetime | None]
"""An item of a listing: its id and the ``created_at`` the API reported for it."""


def check_sorted(what: str, order: str, items: Sequence[Stamped]) -> list[str]:
    """The first place where ``items`` (one listing, in ``order`` ``asc``/``desc``) is not
    sorted by its reported ``(created_at, id)``; an item without a ``created_at`` is a
    problem too (the API always reports it)."""
    missing = [i for i, stamp in items if stamp is None]
    if missing:
        return [f"{what} read {order}: no created_at on {missing}"]
    keys = [(stamp, i) for i, stamp in items]
    for n in range(1, len(keys)):
        before, here = keys[n - 1], keys[n]
        wrong = here <= before if order == "asc" else here >= before
        if wrong:
            return [
                f"{what} read {order}: {here[1]} (created_at {_iso(here[0])}) comes after "
                f"{before[1]} (created_at {_iso(before[0])}): not sorted by created_at, then id"
            ]
    return []


def _iso(stamp: datetime | None) -> str:
    return stamp.isoformat() if stamp is not None else "none"
