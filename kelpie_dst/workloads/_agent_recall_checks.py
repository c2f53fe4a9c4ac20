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
    "check_feedback",
    "check_open_files",
    "check_recalls",
    "check_steps",
    "check_summaries",
    "check_threads",
    "parse_results",
]

MARGIN = 6.0  # seconds: the servers' and the client's clocks skew by at most 2 s each
ROLES = ("user", "assistant", "tool")
_WORD = re.compile(r"\w+")
_SHOWING = re.compile(r"^Showing (\d+) results: (.*)$", re.DOTALL)
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
    UTC); ``entries`` is the thread's model when the answer came."""

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


def check_recall(r: Recall) -> list[str]:
    """One search: every result is a message of the searched thread, of a role asked for,
    containing the query, dated within the range; and there are ``min(limit, matching)`` of
    them, ``matching`` between the messages certainly there and those possibly there."""
    where = f"{r.agent} {r.thread}: conversation_search({r.query!r}, roles={r.roles}, "
    where += f"limit={r.limit}, {r.start_day}..{r.end_day}) sent at {r.sent:.1f}"
    if r.status != "success":
        return [f"{where}: failed: {r.answer[:200]}"]
    results = parse_results(r.answer)
    if results is None:
        return [f"{where}: not a search answer: {r.answer[:200]}"]
    wanted = set(r.roles or ROLES)
    word = r.query.casefold()
    problems: list[str] = []
    by_text: dict[tuple[str, str], Entry] = {(e.role, e.text): e for e in r.entries}
    seen: set[tuple[str, str]] = set()
    for row in results:
        role, content, stamp = row.get("role", ""), row.get("content", ""), row.get("timestamp")
        key = (role, content)
        if role not in wanted:
            problems.append(f"{where}: a {role} message, not of the roles asked: {content!r}")
        if key not in by_text or by_text[key].sent > r.acked:
            problems.append(f"{where}: {role} {content!r} is not a message of this thread")
        if word not in _words(content):
            problems.append(f"{where}: {content!r} does not contain {r.query!r}")
        if key in seen:
            problems.append(f"{where}: {content!r} answered twice")
        seen.add(key)
        try:
            when = _dt.datetime.fromisoformat(str(stamp)).timestamp()
        except ValueError:
            problems.append(f"{where}: {content!r} has no timestamp ({stamp!r})")
            continue
        if not _in_range(when, r.start_day, r.end_day):
            problems.append(f"{where}: {content!r} is dated {stamp}, outside the range")
    certain = possible = 0
    for e in r.entries:
        if e.role not in wanted or word not in _words(e.text) or e.sent > r.acked:
            continue
        first, last = _span_days(e.sent, e.acked if e.acked is not None else r.acked)
        start_ok = r.start_day is None or last >= r.start_day  # may be dated on or after it
        end_ok = r.end_day is None or first <= r.end_day
        if not (start_ok and end_ok):
            continue
        possible += 1
        sure = e.acked is not None and e.acked <= r.sent
        sure = sure and (r.start_day is None or first >= r.start_day)
        sure = sure and (r.end_day is None or last <= r.end_day)
        certain += sure
    limit = r.limit if r.limit is not None else 5
    low, high = min(limit, certain), min(limit, possible)
    if not low <= len(results) <= high:
        problems.append(
            f"{where}: {len(results)} results; the thread holds {certain} certain and "
            f"{possible} possible matches, so between {low} and {high}"
        )
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
    """A step of an acknowledged run as the final read found it, and what the model said."""

    step_id: str
    response_id: str
    prompt_tokens: int
    completion_tokens: int
    feedback: str | None


def check_steps(steps: Sequence[StepSeen], usage: Mapping[str, tuple[int, int]]) -> list[str]:
    """Each step's tokens are those the model reported for the answer the step stored
    (``usage[response id]``: (input tokens, output tokens))."""
    problems = []
    for s in steps:
        said = usage.get(s.response_id)
        if said is not None and said != (s.prompt_tokens, s.completion_tokens):
            problems.append(
                f"step {s.step_id}: prompt/completion tokens {s.prompt_tokens}/"
                f"{s.completion_tokens}, the model's answer {s.response_id} used "
                f"{said[0]}/{said[1]}"
            )
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
