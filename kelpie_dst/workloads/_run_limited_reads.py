"""A run's parts read whole and by ``limit`` (``agent_run_records`` with ``run_traces``, svcT).

A client reads three lists of a finished run, whole or a page at a time: its trace (``GET
/v1/runs/{id}/trace``: the run's root span, then one ``agent_step`` span per step), its steps
(``/steps``) and its messages (``/messages``). Nothing here reads kelpie_agent's code; the
checks are pure functions of what the read API answered (tested on hand-made reads in
``tests/workloads/test_run_limited_reads.py``). Properties (``check_part_reads``):

* **a run's trace is its steps**: the first span is the run (span id and trace id the run's
  id, no parent, named ``agent_run``), then one ``agent_step`` span per step the steps route
  lists, in that order, each a child of the run in the run's trace;
* **a limited read is the start of the whole**: with ``limit`` L, each route answers exactly
  the first min(L, n) items of the whole list, never more than L;
* **a conversation reads the same wherever it is listed**: every agent's messages filtered by
  the conversation (``GET /v1/messages/?conversation_id=``) are exactly the messages of the
  conversation's own listing (``/v1/conversations/{id}/messages``), read just before and
  after.

A run's parts are read whole before and after its limited reads; a run whose whole reads
differ (it was still running) is not judged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "ROUTES",
    "LimitedRead",
    "PartReads",
    "RunParts",
    "Span",
    "check_filtered_threads",
    "check_limited",
    "check_part_reads",
    "check_run_trace",
    "limits_for",
    "read_run_parts",
]

ROUTES = ("trace", "steps", "messages")
MAX_LIMIT = 1000  # the routes' largest limit (docs/http-api.md)


@attrs.frozen
class Span:
    span_id: str
    trace_id: str
    parent: str | None
    name: str


@attrs.frozen
class RunParts:
    """A run's three lists, read whole."""

    run_id: str
    spans: tuple[Span, ...]
    steps: tuple[str, ...]
    messages: tuple[str, ...]

    def ids(self, route: str) -> tuple[str, ...]:
        if route == "trace":
            return tuple(s.span_id for s in self.spans)
        return self.steps if route == "steps" else self.messages


@attrs.frozen
class LimitedRead:
    run_id: str
    route: str
    limit: int
    ids: tuple[str, ...]


@attrs.define
class PartReads:
    whole: dict[str, RunParts] = attrs.Factory(dict)
    limited: list[LimitedRead] = attrs.Factory(list)
    unsettled: int = 0  # runs whose whole reads changed while they were read
    # conversation -> (its own listing's message ids, the top-level listing filtered by it)
    filtered: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = attrs.Factory(dict)


def limits_for(count: int) -> list[int]:
    """The limits a list of ``count`` items is read with: the smallest ones, and those just
    under, at and over its length."""
    wanted = {1, 2, count - 1, count, count + 1}
    return sorted(n for n in wanted if 1 <= n <= MAX_LIMIT)


def check_run_trace(parts: RunParts) -> list[str]:
    """The trace is the run, then its steps in order, as children of the run."""
    rid, spans = parts.run_id, parts.spans
    if not spans:
        return [f"run {rid}: its trace has no span"]
    root = spans[0]
    problems: list[str] = []
    if root != Span(rid, rid, None, "agent_run"):
        problems.append(f"run {rid}: the trace's first span is {root}, not the run")
    steps = tuple(s.span_id for s in spans[1:])
    if steps != parts.steps:
        problems.append(
            f"run {rid}: the trace's step spans {steps} are not its steps {parts.steps}"
        )
    for span in spans[1:]:
        if (span.trace_id, span.parent, span.name) != (rid, rid, "agent_step"):
            problems.append(f"run {rid}: step span {span} is not a step of the run's trace")
    return problems


def check_limited(whole: Mapping[str, RunParts], limited: Sequence[LimitedRead]) -> list[str]:
    """Each limited read is the start of its whole list, at most ``limit`` long."""
    problems: list[str] = []
    for read in limited:
        parts = whole.get(read.run_id)
        if parts is None:
            continue
        expected = parts.ids(read.route)[: read.limit]
        if read.ids != expected:
            problems.append(
                f"run {read.run_id}: {read.route} with limit {read.limit} answered "
                f"{len(read.ids)} item(s) {list(read.ids)}, not the first {len(expected)} "
                f"of the whole list {list(parts.ids(read.route))}"
            )
    return problems


def check_filtered_threads(
    filtered: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]],
) -> list[str]:
    """The top-level listing filtered by a conversation holds exactly its messages."""
    problems: list[str] = []
    for conv, (own, listed) in sorted(filtered.items()):
        if sorted(listed) != sorted(own):
            missing = sorted(set(own) - set(listed))[:3]
            extra = sorted(set(listed) - set(own))[:3]
            problems.append(
                f"conversation {conv}: GET /v1/messages/?conversation_id lists {len(listed)} "
                f"message(s), its own listing {len(own)} (missing {missing}, extra {extra})"
            )
    return problems


def check_part_reads(reads: PartReads) -> list[str]:
    problems: list[str] = []
    for parts in reads.whole.values():
        problems += check_run_trace(parts)
    problems += check_limited(reads.whole, reads.limited)
    return problems + check_filtered_threads(reads.filtered)


def _span(data: Mapping[str, Any]) -> Span:
    return Span(
        str(data.get("span_id")),
        str(data.get("trace_id")),
        data.get("parent_span_id"),
        str(data.get("span_name")),
    )


def _ids(items: Sequence[Any]) -> tuple[str, ...]:
    return tuple(str(i["id"] if isinstance(i, Mapping) else i.id) for i in items)


# One read: (run id, route, limit) -> the answer (a list of JSON objects or of records), or
# None if the run is not found. The two readers of agent_run_records supply it.
Fetch = Callable[[str, str, int], Awaitable[Sequence[Any] | None]]


async def _whole(fetch: Fetch, run_id: str) -> RunParts | None:
    spans = await fetch(run_id, "trace", MAX_LIMIT)
    steps = await fetch(run_id, "steps", MAX_LIMIT)
    messages = await fetch(run_id, "messages", MAX_LIMIT)
    if spans is None or steps is None or messages is None:
        return None
    return RunParts(run_id, tuple(_span(s) for s in spans), _ids(steps), _ids(messages))


async def read_run_parts(fetch: Fetch, run_id: str, reads: PartReads) -> None:
    """Read the run's parts whole, then by every limit of :func:`limits_for`, then whole
    again; keep them if the run stood still."""
    before = await _whole(fetch, run_id)
    if before is None:
        return
    limited: list[LimitedRead] = []
    for route in ROUTES:
        for limit in limits_for(len(before.ids(route))):
            got = await fetch(run_id, route, limit)
            if got is None:
                return
            ids = tuple(_span(s).span_id for s in got) if route == "trace" else _ids(got)
            limited.append(LimitedRead(run_id, route, limit, ids))
    if await _whole(fetch, run_id) != before:
        reads.unsettled += 1
        return
    reads.whole[run_id] = before
    reads.limited += limited
