"""The pure checks of ``agent_recall`` (:mod:`.agent_recall`): recall search, conversations and
steps, judged against the client's own record of what it sent and was told.

Every function takes plain values (no simulation), so ``tests/workloads/test_agent_recall.py``
feeds them hand-made histories. Times are epoch seconds of the client's clock; ``MARGIN``
covers the skew between the client's and the servers' clocks.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping, Sequence

import attrs

__all__ = [
    "MARGIN",
    "ROLES",
    "Entry",
    "Recall",
    "StepSeen",
    "check_agent_patches",
    "check_archived",
    "check_feedback",
    "check_open_files",
    "check_recalls",
    "check_shelf_search",
    "check_shelves",
    "check_steps",
    "check_summaries",
    "check_threads",
    "parse_date_results",
    "parse_results",
    "score",
]

MARGIN = 6.0  # seconds: the servers' and the client's clocks skew by at most 2 s each
ROLES = ("user", "assistant", "tool")
_WORD = re.compile(r"\w+")
_SHOWING = re.compile(r"^Showing (\d+) results: (.*)$", re.DOTALL)
_SHOWING_PAGE = re.compile(r"^Showing (\d+) of (\d+) results \(page \d+/-?\d+\): (.*)$", re.DOTALL)
_MAX = 40


@attrs.define
class Entry:
    """One searchable message the client caused in a thread: its input (``user``) or the
    model's reply to it (``assistant``), with when the send was first sent and acknowledged
    (``acked`` None: never; the message may or may not be stored)."""

    role: str
    text: str
    sent: float
    acked: float | None = None


@attrs.frozen
class Recall:
    """One ``conversation_search`` the client asked the model for, in thread ``thread``, and
    the tool's answer. ``start_day``/``end_day`` are ``YYYY-MM-DD`` (the agents' time zone is
    UTC); ``entries`` is the thread's model when the search was sent (every message of it,
    oldest first; the search's own input included, certainly there)."""

    agent: str
    thread: str
    query: str
    roles: tuple[str, ...] | None
    limit: int | None
    start_day: str | None
    end_day: str | None
    sent: float
    acked: float
    status: str
    answer: str
    entries: tuple[Entry, ...]
    tool: str = "conversation_search"  # or conversation_search_date
    page: int | None = None  # conversation_search_date's


def _day(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).date().isoformat()


def _day_start(day: str) -> float:
    return _dt.datetime.combine(_dt.date.fromisoformat(day), _dt.time.min, _dt.UTC).timestamp()


def _day_end(day: str) -> float:
    return _dt.datetime.combine(_dt.date.fromisoformat(day), _dt.time.max, _dt.UTC).timestamp()


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def parse_results(answer: str) -> list[dict[str, str]] | None:
    """The results of a ``conversation_search`` answer, or None if it is not one."""
    if answer.strip() == "No results found.":
        return []
    found = _SHOWING.match(answer.strip())
    if found is None:
        return None
    try:
        rows = json.loads(found.group(2))
    except ValueError:
        return None
    if not isinstance(rows, list) or len(rows) != int(found.group(1)):
        return None
    if not all(isinstance(r, dict) for r in rows):
        return None
    return [{k: str(v) for k, v in r.items()} for r in rows]


def _in_range(epoch: float, start_day: str | None, end_day: str | None) -> bool:
    return (start_day is None or epoch >= _day_start(start_day)) and (
        end_day is None or epoch <= _day_end(end_day)
    )


def _span_days(first: float, last: float) -> tuple[str, str]:
    return _day(first - MARGIN), _day(last + MARGIN)


def parse_date_results(answer: str) -> tuple[int, list[dict[str, str]]] | None:
    """``(total, the page's results)`` of a ``conversation_search_date`` answer, or None."""
    if answer.strip() == "No results found.":
        return 0, []
    found = _SHOWING_PAGE.match(answer.strip())
    if found is None:
        return None
    rows = parse_results(f"Showing {found.group(1)} results: {found.group(3)}")
    return None if rows is None else (int(found.group(2)), rows)


def score(query: str, text: str) -> int:
    """``conversation_search``'s documented rank of ``text`` for ``query`` (_recall.py, Letta's
    tool description): how many of the query's words it contains, plus ``words + 1`` when it
    holds the whole phrase (case-insensitive); 0: not a match."""
    words, phrase = _words(query), query.casefold().strip()
    found = len(words & _words(text))
    return found + (len(words) + 1 if phrase and phrase in text.casefold() else 0)


def _candidates(r: Recall, wanted: set[str], query: str | None) -> tuple[list[int], list[int]]:
    """The positions (in ``r.entries``, oldest first) of the messages the search must find
    (certainly there, certainly within the days) and of those it may find."""
    certain: list[int] = []
    possible: list[int] = []
    for i, e in enumerate(r.entries):
        if e.role not in wanted or (query is not None and score(query, e.text) == 0):
            continue
        first, last = _span_days(e.sent, e.acked if e.acked is not None else r.acked)
        start_ok = r.start_day is None or last >= r.start_day  # may be dated on or after it
        end_ok = r.end_day is None or first <= r.end_day
        if not (start_ok and end_ok):
            continue
        possible.append(i)
        sure = e.acked is not None and e.acked <= r.sent
        sure = sure and (r.start_day is None or first >= r.start_day)
        sure = sure and (r.end_day is None or last <= r.end_day)
        if sure:
            certain.append(i)
    return certain, possible


def check_recall(r: Recall) -> list[str]:
    """One search. Every result is a message of the searched thread, of a role asked for,
    containing the query (``conversation_search``), dated within the days asked, once.
    ``conversation_search`` answers ``min(limit, matching)`` results, ``matching`` between the
    messages certainly there and those possibly there, best first by :func:`score`, newest
    first among equals, and when the thread's model is certain, exactly the best matches.
    ``conversation_search_date`` reports ``matching`` as its total and answers the page's
    slice of the matches, five per page, oldest first (exactly, when the model is certain)."""
    by_date = r.tool == "conversation_search_date"
    if by_date:
        where = f"{r.agent} {r.thread}: conversation_search_date({r.start_day}..{r.end_day}, "
        where += f"page={r.page}) sent at {r.sent:.1f}"
    else:
        where = f"{r.agent} {r.thread}: conversation_search({r.query!r}, roles={r.roles}, "
        where += f"limit={r.limit}, {r.start_day}..{r.end_day}) sent at {r.sent:.1f}"
    if r.status != "success":
        return [f"{where}: failed: {r.answer[:200]}"]
    total: int | None = None
    if by_date:
        parsed = parse_date_results(r.answer)
        if parsed is not None:
            total, results = parsed
    else:
        results = parse_results(r.answer)  # type: ignore[assignment]
        parsed = None if results is None else (0, results)
    if parsed is None:
        return [f"{where}: not a search answer: {r.answer[:200]}"]
    wanted = set(ROLES) if by_date else set(r.roles or ROLES)
    query = None if by_date else r.query
    problems: list[str] = []
    index = {(e.role, e.text): i for i, e in enumerate(r.entries)}
    keys: list[tuple[str, str]] = []
    for row in results:
        role, content, stamp = row.get("role", ""), row.get("content", ""), row.get("timestamp")
        key = (role, content)
        if role not in wanted:
            problems.append(f"{where}: a {role} message, not of the roles asked: {content!r}")
        if key not in index:
            problems.append(f"{where}: {role} {content!r} is not a message of this thread")
        if query is not None and score(query, content) == 0:
            problems.append(f"{where}: {content!r} does not contain {r.query!r}")
        if key in keys:
            problems.append(f"{where}: {content!r} answered twice")
        keys.append(key)
        try:
            when = _dt.datetime.fromisoformat(str(stamp)).timestamp()
        except ValueError:
            problems.append(f"{where}: {content!r} has no timestamp ({stamp!r})")
            continue
        if not _in_range(when, r.start_day, r.end_day):
            problems.append(f"{where}: {content!r} is dated {stamp}, outside the range")
    certain, possible = _candidates(r, wanted, query)
    exact = certain == possible
    positions = [index[k] for k in keys if k in index]
    entry_keys = [(e.role, e.text) for e in r.entries]
    if by_date:
        page = r.page or 0
        if total is None or not len(certain) <= total <= len(possible):
            problems.append(
                f"{where}: a total of {total}; the thread holds {len(certain)} certain and "
                f"{len(possible)} possible matches"
            )
        if exact:
            expected = [entry_keys[i] for i in certain[page * 5 : (page + 1) * 5]]
            if keys != expected:
                problems.append(f"{where}: page {page} holds {keys}, not {expected}")
        elif positions != sorted(positions) or len(keys) > 5:
            problems.append(f"{where}: a page not oldest first or over 5: {keys}")
        return problems
    limit = r.limit if r.limit is not None else 5
    low, high = min(limit, len(certain)), min(limit, len(possible))
    if not low <= len(results) <= high:
        problems.append(
            f"{where}: {len(results)} results; the thread holds {len(certain)} certain and "
            f"{len(possible)} possible matches, so between {low} and {high}"
        )
        return problems

    def rank(i: int) -> tuple[int, int]:
        return (-score(r.query, r.entries[i].text), -i)

    if exact:
        expected = [entry_keys[i] for i in sorted(certain, key=rank)][:limit]
        if keys != expected:
            problems.append(f"{where}: answered {keys}, not the best matches {expected}")
    elif positions != sorted(positions, key=rank):
        problems.append(f"{where}: results not best first, newest first among equals: {keys}")
    return problems


def check_recalls(recalls: Sequence[Recall]) -> list[str]:
    problems: list[str] = []
    for r in recalls:
        problems += check_recall(r)
    return problems[:_MAX]


def check_threads(
    expected: Mapping[str, Sequence[str]],
    optional: Mapping[str, set[str]],
    stored: Mapping[str, Sequence[str] | None],
) -> list[str]:
    """``expected[thread]``: the inputs acknowledged in it (a fork's: its source's up to the
    message it was cut at, then its own), in order; ``optional[thread]``: inputs that may be
    there too (sent, never acknowledged); ``stored[thread]``: the inputs the final read found
    (None: the thread is gone, as a deleted conversation must be)."""
    problems: list[str] = []
    for thread, inputs in sorted(expected.items()):
        got = stored.get(thread)
        if got is None:
            problems.append(f"{thread}: gone, but it was not deleted")
            continue
        mine = [t for t in got if t in set(inputs)]
        if mine != list(inputs):
            problems.append(f"{thread}: acknowledged inputs {list(inputs)}, stored {mine}")
        strangers = [t for t in got if t not in set(inputs) and t not in optional.get(thread, ())]
        if strangers:
            problems.append(f"{thread}: holds inputs it was never sent: {strangers}")
    for thread, got in sorted(stored.items()):
        if thread not in expected and got is not None:
            problems.append(f"{thread}: deleted, but still readable ({len(got)} inputs)")
    return problems[:_MAX]


def check_summaries(summaries: Mapping[str, tuple[Sequence[str], str | None]]) -> list[str]:
    """``summaries[conversation]``: (the summaries the client set, in order, each
    acknowledged before the next was sent; the summary the final read found)."""
    problems = []
    for conv, (given, found) in sorted(summaries.items()):
        if given and found != given[-1]:
            problems.append(
                f"{conv}: its summary was last set to {given[-1]!r}, it reads {found!r}"
            )
    return problems


@attrs.frozen
class StepSeen:
    """A step of an acknowledged run as the final read found it."""

    step_id: str
    response_id: str
    prompt_tokens: int
    completion_tokens: int
    feedback: str | None
    run_id: str = ""
    number: int = 0
    stop_reason: str | None = None
    model: str = ""


def check_steps(
    steps: Sequence[StepSeen],
    usage: Mapping[str, tuple[int, int, str]],
    stops: Mapping[str, str] | None = None,
) -> list[str]:
    """Each step's tokens and model are those of the model's answer the step stored
    (``usage[response id]``: (input tokens, output tokens, the model asked)); in a run that
    ended on its answer (``stops[run]``: the stop reason the client was told, ``end_turn``),
    the last step carries that stop reason and the others none."""
    problems = []
    runs: dict[str, list[StepSeen]] = {}
    for s in steps:
        runs.setdefault(s.run_id, []).append(s)
        said = usage.get(s.response_id)
        if said is None:
            continue
        if said[:2] != (s.prompt_tokens, s.completion_tokens):
            problems.append(
                f"step {s.step_id}: prompt/completion tokens {s.prompt_tokens}/"
                f"{s.completion_tokens}, the model's answer {s.response_id} used "
                f"{said[0]}/{said[1]}"
            )
        if said[2] != s.model:
            problems.append(f"step {s.step_id}: model {s.model!r}, the model asked was {said[2]!r}")
    for run_id, found in sorted(runs.items()):
        stop = (stops or {}).get(run_id)
        if stop != "end_turn" or not found:
            continue
        found = sorted(found, key=lambda s: s.number)
        shown = [s.stop_reason for s in found]
        if shown != [None] * (len(found) - 1) + [stop]:
            problems.append(f"run {run_id} stopped with {stop}; its steps' stop reasons: {shown}")
    return problems[:_MAX]


def check_feedback(
    given: Mapping[str, Sequence[str | None]],
    found: Mapping[str, str | None],
    rated: set[str],
    unrated: set[str],
) -> list[str]:
    """``given[step]``: the feedback the client set on it, in order (None: cleared), each
    acknowledged before the next was sent; ``found``: what ``steps.retrieve`` reads;
    ``rated``/``unrated``: the steps ``steps.list(has_feedback=True/False)`` listed."""
    problems = []
    for step, values in sorted(given.items()):
        if not values:
            continue
        last = values[-1]
        if step in found and found[step] != last:
            problems.append(f"step {step}: feedback last set to {last!r}, it reads {found[step]!r}")
        if last is None and step in rated:
            problems.append(f"step {step}: feedback cleared, listed with has_feedback=true")
        if last is not None and step in unrated:
            problems.append(f"step {step}: rated {last!r}, listed with has_feedback=false")
        listed = step in rated if last is not None else step in unrated
        if not listed:
            problems.append(f"step {step}: not listed by has_feedback={last is not None}")
    return problems[:_MAX]


def check_open_files(opened: Sequence[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> list[str]:
    """Each read after an open: (agent, the files the model says are open: the most recently
    opened, up to ``max_files_open``; the files the read found open)."""
    return [
        f"{agent}: open files {list(read)}, the most recently opened are {list(model)}"
        for agent, model, read in opened
        if model != read
    ][:_MAX]


def check_agent_patches(
    patches: Sequence[tuple[str, str, tuple[object, ...], tuple[object, ...]]],
) -> list[str]:
    """Each read of an agent after a ``PATCH``: (agent, the body sent, the model's (tags,
    description): the fields given set, the others kept; what the read found)."""
    return [
        f"{agent}: after PATCH {sent}, tags and description read {read}, not {model}"
        for agent, sent, model, read in patches
        if model != read
    ][:_MAX]


def check_archived(
    model: Mapping[str, tuple[bool, bool]],
    found: Mapping[str, bool | None],
    listed: Mapping[str, set[str]],
) -> list[str]:
    """``model[conv]``: (archived as last set, deleted); ``found[conv]``: the flag its record
    reads (None: not read); ``listed[status]``: the agent's conversations listed with
    ``archive_status`` ``archived``, ``unarchived`` and ``all`` (conversations the model does
    not know, an orphan of a fork whose answer was lost, are not judged)."""
    problems = []
    for conv, (archived, deleted) in sorted(model.items()):
        where = {st for st, ids in listed.items() if conv in ids}
        want = set() if deleted else {"all", "archived" if archived else "unarchived"}
        if where != want:
            problems.append(
                f"{conv} (archived {archived}, deleted {deleted}) is listed under "
                f"{sorted(where)}, not {sorted(want)}"
            )
        if not deleted and found.get(conv) is not None and found[conv] != archived:
            problems.append(f"{conv}: archived was last set to {archived}, it reads {found[conv]}")
    return problems[:_MAX]


def check_shelf_search(
    searches: Sequence[tuple[str, Sequence[str], Sequence[str], int, Sequence[str]]],
) -> list[str]:
    """Each archival search after an attach, detach or delete: (agent, the passages of the
    archives attached then, certainly there; also those whose add had no answer; top_k; the
    hits). Every hit is one of those, once; there are ``min(top_k, passages there)``."""
    problems = []
    for agent, certain, possible, top_k, hits in searches:
        strangers = [h for h in hits if h not in set(possible)]
        if strangers:
            problems.append(
                f"{agent}: archival search found passages of no attached archive: {strangers}"
            )
        if len(set(hits)) != len(hits):
            problems.append(f"{agent}: archival search found a passage twice: {list(hits)}")
        low, high = min(top_k, len(certain)), min(top_k, len(possible))
        if not low <= len(hits) <= high:
            problems.append(
                f"{agent}: archival search found {len(hits)} passages, not between {low} and {high}"
            )
    return problems[:_MAX]


def check_shelves(
    agent: str,
    model: Mapping[str, tuple[bool, bool]],
    read: tuple[set[str], set[str], Mapping[str, set[str]]],
) -> list[str]:
    """``model[archive]``: (attached, deleted) as last set; ``read``: (``archives.list(
    agent_id=agent)``, the agent's ``archive_ids``, each archive's ``archives.list(name=its
    last name)``). The agent lists exactly its attached live archives, both ways; a live
    archive is found by its name, a deleted one is not."""
    listed, ids, named = read
    want = {a for a, (attached, deleted) in model.items() if attached and not deleted}
    problems = []
    mine = set(model)
    if listed & mine != want:
        problems.append(
            f"{agent}: archives.list(agent_id) gives {sorted(listed & mine)}, not {sorted(want)}"
        )
    if ids & mine != want:
        problems.append(f"{agent}: archive_ids are {sorted(ids & mine)}, not {sorted(want)}")
    for archive, (_, deleted) in sorted(model.items()):
        expected = set() if deleted else {archive}
        if named.get(archive, set()) & mine != expected:
            problems.append(
                f"{archive} (deleted {deleted}): archives.list(name=its name) gives "
                f"{sorted(named.get(archive, set()))}"
            )
    return problems
