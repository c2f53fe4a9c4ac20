"""Options of the service, and paging through an in-memory list with Letta's cursors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from ._errors import NotFoundError
from ._index import window

__all__ = ["ServiceOptions", "paginate"]

T = TypeVar("T")


def _positive(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(
            f"ServiceOptions.{attribute.name} must be a positive number, got {value!r}"
        )


@attrs.frozen
class ServiceOptions:
    """How hard the service tries before it answers :class:`UnavailableError`.

    * ``request_timeout``: how long a request to an agent is retried while the agent cannot be
      reached (its lease is held by a dead or partitioned node, the request's outcome was lost
      with a lease, storage failed), backing off from ``retry_backoff`` seconds.
    * ``storage_attempts`` / ``storage_backoff``: the service's own KV reads.
    * ``stream_buffer``: events a slow stream consumer may fall behind before the run waits for
      it (the agent drops a consumer that stays stuck for ``LoopConfig.sink_timeout``).
    * ``scheduler``: whether the node runs a scheduler that sends scheduled messages
      (``_scheduler``); ``schedule_rescan``: how often it looks for schedules when none is due
      sooner (schedules created on other nodes); ``schedule_retry``: its first backoff after
      a failed scan or fire (doubling up to ``schedule_rescan``).
    """

    request_timeout: float = attrs.field(default=60.0, validator=_positive)
    retry_backoff: float = attrs.field(default=0.2, validator=_positive)
    storage_attempts: int = attrs.field(default=8, validator=_positive)
    storage_backoff: float = attrs.field(default=0.05, validator=_positive)
    stream_buffer: int = attrs.field(default=16, validator=_positive)
    scheduler: bool = True
    schedule_rescan: float = attrs.field(default=30.0, validator=_positive)
    schedule_retry: float = attrs.field(default=1.0, validator=_positive)


def paginate(
    items: Sequence[T],
    key: Callable[[T], str],
    *,
    kind: str,
    after: str | None,
    before: str | None,
    limit: int | None,
    descending: bool,
) -> list[T]:
    """One page of ``items`` (given oldest first) with Letta's cursor semantics (see
    ``_index.window``); an unknown cursor is a :class:`NotFoundError` naming it. The one
    pager of in-memory lists (``limit`` None: no limit)."""
    if limit is None:
        limit = len(items)
    position = {key(item): i for i, item in enumerate(items)}
    for field, cursor in (("after", after), ("before", before)):
        if cursor is not None and cursor not in position:
            raise NotFoundError(kind, cursor, f"{field}: {kind} {cursor!r} not found")
    win = window(descending, after, before)
    low = position[win.low] + 1 if win.low is not None else 0
    high = position[win.high] if win.high is not None else len(items)
    chosen = list(items[low:high])
    page = chosen[::-1][:limit] if win.from_high else chosen[:limit]
    return page[::-1] if win.reverse else page
