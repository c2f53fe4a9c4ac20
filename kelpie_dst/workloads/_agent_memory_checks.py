"""The properties of ``agent_memory`` (archival search, recall search, memory edits racing the
blocks API, the prompt's memory counts), as pure checks over what the client recorded.

Every expectation is computed from the workload's own model of what it stored, with the
documented predicates (docs/embeddings.md, docs/tools/*.md, Letta's contract), never with the
server's search or filter code. Times that order operations are the simulator's virtual time
(``trio.current_time()``: one clock for every node); the times a filter compares are the
``created_at`` the server gave each passage when it acknowledged it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

__all__ = [
    "BoardOp",
    "BoardRead",
    "Hit",
    "Probe",
    "Search",
    "Stored",
    "check_board",
    "check_listed",
    "check_probes",
    "check_searches",
]


@attrs.define
class Stored:
    """A passage the client stored (or tried to): ``owner`` is the agent or archive that holds
    it; ``created_at`` the server's, from the acknowledgement (None: the outcome is unknown).
    Times: when the insert was sent and acknowledged, and when a delete was sent and
    acknowledged (virtual time; None: not yet, or never known)."""

    text: str
    tags: frozenset[str]
    owner: str
    sent: float
    acked: float | None = None
    created_at: float | None = None
    id: str | None = None
    delete_sent: float | None = None
    delete_acked: float | None = None
    failed: bool = False  # the insert was answered with an error: it never happened


@attrs.frozen
class Hit:
    text: str
    tags: frozenset[str]


@attrs.frozen
class Search:
    """One archival search the client made (``via``: ``api`` or ``tool``) and its answer."""

    agent: str
    scope: frozenset[str]  # the agent and the archives attached to it
    via: str
    tags: tuple[str, ...]
    mode: str
    top_k: int
    start: float | None
    end: float | None
    sent: float
    done: float
    hits: tuple[Hit, ...]


def _matches(s: Search, tags: frozenset[str], created_at: float | None) -> bool:
    """The documented filter: tags any/all (no tags: none), ``start <= created_at <= end``."""
    wanted = frozenset(s.tags)
    if wanted:
        if s.mode == "all" and not wanted <= tags:
            return False
        if s.mode == "any" and wanted.isdisjoint(tags):
            return False
    if created_at is None:
        return True
    return (s.start is None or s.start <= created_at) and (s.end is None or created_at <= s.end)


def check_searches(searches: Sequence[Search], stored: Iterable[Stored]) -> list[str]:
    """Every hit is a passage of the agent or its archives, not deleted before the search,
    that passes the filters; a search answers at most ``top_k`` hits, and exactly
    ``min(top_k, matching)`` when the matching set is known (at least the passages certainly
    there, at most those possibly there)."""
    by_text = {p.text: p for p in stored}
    problems = []
    for s in searches:
        who = (
            f"{s.via} search of {s.agent} (tags={list(s.tags)} {s.mode}, top_k={s.top_k}, "
            f"start={s.start}, end={s.end}, at {s.sent:.1f})"
        )
        if len(s.hits) > s.top_k:
            problems.append(f"{who}: {len(s.hits)} hits, over top_k")
        for hit in s.hits:
            p = by_text.get(hit.text)
            if p is None or p.failed:
                problems.append(f"{who}: a hit nobody stored: {hit.text!r:.60}")
                continue
            if p.owner not in s.scope:
                problems.append(f"{who}: a hit of {p.owner}, not of the agent: {hit.text!r:.60}")
            if p.delete_acked is not None and p.delete_acked < s.sent:
                problems.append(f"{who}: a hit deleted before the search: {hit.text!r:.60}")
            if not _matches(s, p.tags, p.created_at):
                problems.append(
                    f"{who}: a hit outside the filters: {hit.text!r:.60} (tags "
                    f"{sorted(p.tags)}, created_at {p.created_at})"
                )
        certain = possible = 0
        for p in by_text.values():
            if p.owner not in s.scope or p.failed or p.sent > s.done:
                continue
            if p.delete_acked is not None and p.delete_acked < s.sent:
                continue
            if not _matches(s, p.tags, p.created_at):
                continue
            possible += 1
            there = p.acked is not None and p.acked < s.sent and p.created_at is not None
            if there and (p.delete_sent is None or p.delete_sent > s.done):
                certain += 1
        low, high = min(s.top_k, certain), min(s.top_k, possible)
        if not low <= len(s.hits) <= high:
            problems.append(
                f"{who}: {len(s.hits)} hits; {certain} passages certainly match and {possible} "
                f"may, so it must be between {low} and {high}"
            )
    return problems


def check_listed(
    agent: str, scope: frozenset[str], listed: Sequence[str], stored: Iterable[Stored]
) -> list[str]:
    """The final list of the agent's passages: every acknowledged passage of its scope that no
    delete was sent for, once; nothing deleted, failed, foreign or unknown."""
    by_text = {p.text: p for p in stored}
    problems = []
    seen: set[str] = set()
    for text in listed:
        p = by_text.get(text)
        if text in seen:
            problems.append(f"{agent}: passage {text!r:.60} listed twice")
        seen.add(text)
        if p is None or p.failed:
            problems.append(f"{agent}: lists a passage nobody stored: {text!r:.60}")
        elif p.owner not in scope:
            problems.append(f"{agent}: lists {p.owner}'s passage {text!r:.60}")
        elif p.delete_acked is not None:
            problems.append(f"{agent}: lists the deleted passage {text!r:.60}")
    for p in by_text.values():
        kept = p.owner in scope and p.acked is not None and p.delete_sent is None
        if kept and p.text not in seen:
            problems.append(f"{agent}: the acknowledged passage {p.text!r:.60} is lost")
    return problems


@attrs.frozen
class Probe:
    """A tool call the client asked the model to make, and its result as the agent stored it
    (``status``: the tool return's; ``text``: the tool's message)."""

    agent: str
    tool: str
    args: Mapping[str, object] = attrs.field(hash=False)
    status: str
    text: str
    expect: str  # "ok", "error", or "count>=N" for a conversation search
    sent: float


def check_probes(probes: Sequence[Probe]) -> list[str]:
    """A refused edit is refused (read-only, over the limit), an allowed one succeeds; a
    conversation search answers ``min(limit, matching)`` results (at least the inputs known to
    match), each of which contains the query."""
    problems = []
    for p in probes:
        who = f"{p.tool} of {p.agent} at {p.sent:.1f} ({dict(p.args)!s:.100})"
        if p.expect in ("ok", "error"):
            got = "ok" if p.status == "success" else "error"
            if got != p.expect:
                problems.append(f"{who}: expected {p.expect}, the tool said {p.text!r:.100}")
            continue
        if p.expect.startswith("count>="):
            matching = int(p.expect.removeprefix("count>="))
            limit = int(p.args.get("limit") or 5)  # type: ignore[call-overload]
            results = _conversation_results(p.text)
            if results is None:
                problems.append(f"{who}: an answer that is not a search result: {p.text!r:.100}")
                continue
            if len(results) > limit:
                problems.append(f"{who}: {len(results)} results, over its limit")
            if len(results) < min(limit, matching):
                problems.append(
                    f"{who}: {len(results)} results, but {matching} stored messages match "
                    f"(expected min(limit, matching) = {min(limit, matching)})"
                )
            query = str(p.args.get("query", "")).casefold()
            for r in results:
                if query not in str(r.get("content", "")).casefold():
                    problems.append(f"{who}: a result without the query: {r!r:.100}")
    return problems


def _conversation_results(text: str) -> list[dict[str, object]] | None:
    import json

    if text.strip() == "No results found.":
        return []
    head, sep, body = text.partition(": ")
    if not sep or not head.startswith("Showing "):
        return None
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, list) else None


@attrs.frozen
class BoardOp:
    """A change of a board block: ``set`` (the blocks API sets ``value``), ``describe`` (the
    blocks API changes only the description: the value must stay) or ``append`` (the agent's
    ``core_memory_append`` adds the line ``value``). ``acked`` None: the outcome is unknown."""

    kind: str
    value: str
    sent: float
    acked: float | None


@attrs.frozen
class BoardRead:
    value: str
    sent: float
    done: float


def check_board(
    block: str, initial: str, ops: Sequence[BoardOp], reads: Sequence[BoardRead]
) -> list[str]:
    """No acknowledged edit is lost: every read shows a value some serial order of the edits
    gives, one that keeps the real-time order (an edit acknowledged before another was sent
    comes first). A value is its base (the initial value or the last ``set``) followed by the
    lines appended after it. For a read: the base was set before the read ended, and no set
    acknowledged after the base was sent came between (sent after the base was acknowledged,
    acknowledged before the read was sent); each appended line was sent before the read ended
    and not acknowledged before the base was sent; and every append acknowledged before the
    read was sent, sent after the base was acknowledged, is there."""
    sets = {op.value: op for op in ops if op.kind == "set"}
    appends = {op.value: op for op in ops if op.kind == "append"}
    problems = []
    for r in reads:
        who = f"{block} read at {r.sent:.1f}-{r.done:.1f} ({r.value!r:.80})"
        base, *tail = r.value.split("\n")
        if base == initial:
            base_op = None
        elif base in sets:
            base_op = sets[base]
        else:
            problems.append(f"{who}: its first line is no value that was set")
            continue
        if base_op is not None and base_op.sent > r.done:
            problems.append(f"{who}: shows a value set after the read")
            continue
        base_acked = base_op.acked if base_op is not None else -1.0
        base_sent = base_op.sent if base_op is not None else -1.0
        later = [
            op
            for op in sets.values()
            if op is not base_op
            and op.acked is not None
            and op.acked < r.sent
            and base_acked is not None
            and op.sent > base_acked
        ]
        if later:
            problems.append(
                f"{who}: shows {base!r}, but {later[0].value!r} was set after it "
                f"(sent {later[0].sent:.1f}, acknowledged {later[0].acked:.1f}) before the read"
            )
        for line in tail:
            op = appends.get(line)
            if op is None:
                problems.append(f"{who}: the line {line!r} was never appended")
            elif op.sent > r.done:
                problems.append(f"{who}: shows {line!r}, appended after the read")
            elif op.acked is not None and op.acked < base_sent:
                problems.append(f"{who}: {line!r} was appended before its base was set")
        if len(set(tail)) != len(tail):
            problems.append(f"{who}: a line appended twice")
        if base_acked is None:
            continue
        for op in appends.values():
            known = op.acked is not None and op.acked < r.sent and op.sent > base_acked
            if known and op.value not in tail:
                problems.append(
                    f"{who}: the acknowledged append {op.value!r} (sent {op.sent:.1f}, "
                    f"acknowledged {op.acked:.1f}) is lost"
                )
    return problems
