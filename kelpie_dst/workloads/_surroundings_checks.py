"""The SURROUNDINGS oracle's pure checks (``agent_surroundings`` drives; docs/oracles.md).

What a user of Letta's archives, identities and folders would state, each judged against the
workload's own model (never against a server helper):

* **A search ranks by cosine.** Every archival search hit's score is the cosine similarity of
  the query's and the passage's embeddings, computed here from a fresh embedder of the kind
  the nodes use (so a vector cache or an index that drifts from its embedder shows); hits come
  best first; each passes the documented filters (tags any/all; ``start <= created_at <= end``,
  both ends inclusive) and belongs to the agent or an archive attached to it, not deleted; a
  search answers ``min(top_k, matching)`` hits (the matching set between the passages
  certainly there and those possibly there), and no passage certainly there that matches is
  left out while a worse one is answered.
* **An identifier key names one identity.** A create with a key no identity has is created
  (not refused), one with a key an acknowledged identity holds is refused; after a key change
  the old key is free; the listing holds each key once, and looking a key up answers the
  identity that holds it. An update that restates an identity's own key (a client sending the
  record back whole with a new name, ``identity_renames``) is no key change: it is never
  refused as taken, and the identity is listed with the new name (rtU).
* **An identity's agents are the attached ones.** ``agents.list(identity_id=...)`` answers
  exactly the agents the model attached it to (a detach from one agent leaves the others).
* **A folder's names are unique.** Uploads of one name with ``suffix`` get distinct names, each
  the original or ``stem_(n).ext``; the folder lists no name twice.
* **One agent's detach leaves another's files.** Detaching a folder from one agent leaves the
  files another agent has open exactly as they were, and the detached agent lists none of them.
* **A list scoped to an agent holds what is attached to it** (svcV, ``scoped_lists``): its
  archives and its folders, read after every attach, detach and delete, are exactly those the
  client attached to that agent and did not detach or delete; an agent's files walked in pages
  put together are its whole list, and a page says more follow exactly when a later one has some.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import attrs

__all__ = [
    "MISSING",
    "FilePages",
    "PassageSeen",
    "ScheduleSeen",
    "SearchSeen",
    "SurroundingsLog",
    "check_content_reads",
    "check_file_pages",
    "check_folders",
    "check_identities",
    "check_numbered",
    "check_respelled",
    "check_schedules",
    "check_scoped",
    "check_searches",
    "check_surroundings",
    "check_ties",
    "cosine",
]

_EPS = 1e-9
FilePages = tuple[str, int, list[bool], list[list[str]], list[str]]
"""A list walked in pages: (what, page size, each page's "more" flag, the pages, the list)."""
_MAX = 8  # problems reported per check
MISSING = "(missing)"
"""An identity lookup whose key names an identity that is not there."""


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is zero (the documented convention)."""
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(x * x for x in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


@attrs.define
class PassageSeen:
    """A passage the client stored: ``owner`` is the agent or the archive it went to;
    ``created_at`` is known once acknowledged; ``sure``: acknowledged (else its outcome is
    unknown); ``deleted``: a delete of it was acknowledged."""

    text: str
    owner: str
    tags: frozenset[str]
    created_at: float | None = None
    sure: bool = False
    deleted: bool = False
    id: str | None = None  # the passage id the create answered (None: not known)


@attrs.frozen
class SearchSeen:
    """One archival search: the filters, the scope (the agent and its attached archives at the
    time), the passages certainly and possibly there (texts), the model's score of every
    possible passage, and the hits ``(text, score, created_at, tags)``."""

    agent: str
    query: str
    tags: tuple[str, ...]
    mode: str
    top_k: int
    start: float | None
    end: float | None
    certain: frozenset[str]
    possible: frozenset[str]
    model: Mapping[str, float]  # text -> the model's cosine for this query
    created: Mapping[str, float]  # text -> created_at, for the certain passages
    tagged: Mapping[str, frozenset[str]]  # text -> tags, for every possible passage
    hits: tuple[tuple[str, float, float, frozenset[str]], ...]
    # session 17 (llmL): the passage id of each hit, in order, and the ids the client knows of
    # the possible passages (key -> id); empty when not recorded
    hit_ids: tuple[str, ...] = ()
    ids: Mapping[str, str] = attrs.field(factory=dict)
    # the query embeds to the zero vector (stop words only): every passage scores 0
    zero_query: bool = False


@attrs.define
class ScheduleSeen:
    """A schedule the client created (far ahead: nothing fires): ``cron`` or ``at`` (epoch
    seconds); ``sent``/``acked`` the client's clock around the create; what the create and a
    later retrieve answered (``next_at``, None when unknown)."""

    cron: str | None
    at: float | None
    sent: float
    acked: float | None = None
    id: str | None = None
    next_at: float | None = None
    retrieved: float | None = None
    deleted: bool = False


@attrs.define
class SurroundingsLog:
    searches: list[SearchSeen] = attrs.Factory(list)
    # identities: (key, outcome) per create in order: "made:<id>", "refused", "unknown"
    identity_creates: list[tuple[str, str, bool]] = attrs.Factory(list)  # (key, outcome, taken)
    identity_keys: dict[str, str] = attrs.Factory(dict)  # id -> its last key (acknowledged)
    identity_list: list[tuple[str, str]] = attrs.Factory(list)  # (id, key) as listed at the end
    identity_lookups: list[tuple[str, str | None, str | None]] = attrs.Factory(list)
    identity_deleted: list[str] = attrs.Factory(list)  # ids whose delete was acknowledged
    # (id, new name, "ok" or "refused: ...") of each rename that restated the identity's key
    identity_renames: list[tuple[str, str, str]] = attrs.Factory(list)
    identity_names: dict[str, str] = attrs.Factory(dict)  # id -> its name as listed at the end
    identity_agents: list[tuple[str, frozenset[str], frozenset[str]]] = attrs.Factory(list)
    uploads: list[tuple[str, str | None]] = attrs.Factory(list)  # (original, name answered)
    folder_names: list[str] = attrs.Factory(list)  # as listed at the end
    open_before: frozenset[str] = frozenset()  # the other agent's open files, before
    open_after: frozenset[str] | None = None  # ... and after the detach
    detached_listed: int | None = None  # files the detached agent lists afterwards
    # duplicate handling of a taken name: "error" answered (True: refused, False: stored),
    # "skip" answered this name, "replace": the file it replaced, the new one, the listing after
    error_refused: bool | None = None
    skip_name: str | None = None
    replaced: tuple[str, str, frozenset[str]] | None = None
    # searches repeated with the query upper-cased and stop words added: (query, changed,
    # hits, hits again); the embedder case-folds and skips stop words (docs/embeddings.md)
    respelled: list[
        tuple[str, str, tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]
    ] = attrs.Factory(list)
    schedules: list[ScheduleSeen] = attrs.Factory(list)
    message_windows: int = 0  # agents whose message search was judged by date windows
    step_windows: int = 0  # agents whose step list was judged by time windows (svcV)
    # the archive renamed: (archives listed by the new name, by the old name); then deleted:
    # (its id, still listed, agents whose archive_ids still hold it)
    archive_names: tuple[str, list[str], list[str]] | None = None
    archive_gone: tuple[str, bool, list[str]] | None = None
    # the folder deleted: (files the other agent still lists, folders named "docs", still in
    # that agent's folder_ids)
    folder_gone: tuple[int, int, bool] | None = None
    name_reused: tuple[bool, bool] | str | None = None  # (new ids, listed alone) or the error
    schedule_pages: list[tuple[int, list[bool], list[list[str]]]] = attrs.Factory(list)
    schedule_listed: list[tuple[str, float, str]] = attrs.Factory(list)  # (id, created_at, id)
    schedule_gone: list[tuple[str, bool]] = attrs.Factory(list)  # (deleted id, still found)
    problems: list[str] = attrs.Factory(list)  # found while running
    # session 17 (llmL, ``numbered``): searches for a number only one passage holds: (the
    # number, that passage's text, the hits as (text, score))
    numbered: list[tuple[str, str, tuple[tuple[str, float], ...]]] = attrs.Factory(list)
    # session 25 (svcV, ``scoped_lists``): (what, the ids the client attached, the ids listed)
    # of each list scoped to one agent: its archives, its folders
    scoped: list[tuple[str, frozenset[str], frozenset[str]]] = attrs.Factory(list)
    # ... and the agent's files walked in pages: (what, page size, each page's "more" flag, the
    # pages, the whole list read first)
    file_pages: list[FilePages] = attrs.Factory(list)
    # ``content_polls``: (file id, [(status, content or None)] read while it was processed)
    content_reads: list[tuple[str, list[tuple[str, str | None]]]] = attrs.Factory(list)


def _filters_pass(s: SearchSeen, tags: frozenset[str], created_at: float | None) -> bool:
    wanted = frozenset(s.tags)
    if wanted:
        if s.mode == "all" and not wanted <= tags:
            return False
        if s.mode == "any" and wanted.isdisjoint(tags):
            return False
    if created_at is None:
        return True
    return (s.start is None or s.start <= created_at) and (s.end is None or created_at <= s.end)


def check_searches(searches: Iterable[SearchSeen]) -> list[str]:
    problems: list[str] = []
    for s in searches:
        who = (
            f"search of {s.agent} for {s.query!r} (tags={list(s.tags)} {s.mode}, "
            f"top_k={s.top_k}, start={s.start}, end={s.end})"
        )
        texts = [h[0] for h in s.hits]
        if len(set(texts)) != len(texts):
            problems.append(f"{who}: a passage answered twice: {texts}")
        for (_, a, _, _), (_, b, _, _) in zip(s.hits, s.hits[1:], strict=False):
            if a < b - _EPS:
                problems.append(f"{who}: hits not best first: scores {[h[1] for h in s.hits]}")
                break
        for text, score, created_at, tags in s.hits:
            if text not in s.possible:
                problems.append(f"{who}: a hit outside the agent's archival memory: {text!r}")
                continue
            if not _filters_pass(s, s.tagged.get(text, tags), s.created.get(text, created_at)):
                problems.append(
                    f"{who}: a hit outside the filters: {text!r} (tags {sorted(tags)}, "
                    f"created_at {created_at})"
                )
            want = s.model[text]
            if not -1.0 - _EPS <= score <= 1.0 + _EPS or abs(score - want) > 1e-6:
                problems.append(
                    f"{who}: {text!r} scored {score!r}, but its cosine similarity is {want!r}"
                )
        matching = [t for t in s.certain if _filters_pass(s, s.tagged[t], s.created.get(t))]
        maybe = [
            t
            for t in s.possible - s.certain
            if _filters_pass(s, s.tagged[t], None)  # its date is unknown: it may match
        ]
        low, high = min(s.top_k, len(matching)), min(s.top_k, len(matching) + len(maybe))
        if not low <= len(s.hits) <= high:
            problems.append(
                f"{who}: {len(s.hits)} hits; {len(matching)} passages certainly match and "
                f"{len(maybe)} more may, so it must be between {low} and {high}"
            )
        if s.hits:
            worst = min(s.model.get(t, math.inf) for t in texts)
            left = [
                t
                for t in matching
                if t not in texts and (len(s.hits) < s.top_k or s.model[t] > worst + 1e-6)
            ]
            if left:
                problems.append(
                    f"{who}: left out {left[:3]} (cosine "
                    f"{[round(s.model[t], 6) for t in left[:3]]}) but answered a hit of "
                    f"cosine {worst:.6f}"
                )
    return problems[:_MAX]


def check_identities(log: SurroundingsLog) -> list[str]:
    problems: list[str] = []
    for key, outcome, taken in log.identity_creates:
        if outcome == "refused" and not taken:
            problems.append(
                f"a create of identity key {key!r}, which no identity held, was refused"
            )
        if outcome.startswith("made:") and taken:
            problems.append(f"a create of identity key {key!r}, held by an identity, succeeded")
    keys = [key for _, key in log.identity_list]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        problems.append(f"identity keys held by more than one identity: {twice}")
    listed = dict(log.identity_list)
    for identity, key in log.identity_keys.items():
        if listed.get(identity) != key:
            problems.append(
                f"identity {identity} is listed with key {listed.get(identity)!r}, not {key!r}"
            )
    for identity, name, outcome in log.identity_renames:
        if outcome != "ok":
            problems.append(
                f"a rename of identity {identity} that restated its own identifier key was "
                f"{outcome}"
            )
        elif identity not in log.identity_deleted and log.identity_names.get(identity) != name:
            problems.append(
                f"identity {identity} is listed as {log.identity_names.get(identity)!r} after "
                f"its rename to {name!r} was acknowledged"
            )
    for identity in log.identity_deleted:
        if identity in listed:
            problems.append(f"identity {identity} is listed after its delete was acknowledged")
    for key, found, found_key in log.identity_lookups:
        if found in log.identity_deleted:
            problems.append(f"identity key {key!r} looks up {found}, which was deleted")
        if found == MISSING:
            problems.append(f"identity key {key!r} names an identity that does not exist")
            continue
        if found is not None and found_key != key:
            problems.append(f"identity key {key!r} looks up {found}, whose key is {found_key!r}")
        if found is None and key in keys:
            problems.append(f"identity key {key!r} looks up nothing, yet an identity holds it")
    for identity, want, got in log.identity_agents:
        if want != got:
            problems.append(
                f"agents.list(identity_id={identity}) answers {sorted(got)}, not {sorted(want)}"
            )
    return problems[:_MAX]


_SUFFIXED = re.compile(r"^(?P<stem>.*)_\((?P<n>[1-9][0-9]*)\)(?P<ext>\.[^.]*)?$")


def _named_after(name: str, original: str) -> bool:
    if name == original:
        return True
    match = _SUFFIXED.match(name)
    if match is None:
        return False
    stem, dot, ext = original.rpartition(".")
    if not dot:
        stem, ext = original, ""
    return match["stem"] == stem and (match["ext"] or "") == (f".{ext}" if dot else "")


def check_folders(log: SurroundingsLog) -> list[str]:
    problems: list[str] = []
    answered = [name for _, name in log.uploads if name is not None]
    twice = sorted({n for n in answered if answered.count(n) > 1})
    if twice:
        problems.append(f"uploads answered with the same file name: {twice}")
    for original, name in log.uploads:
        if name is not None and not _named_after(name, original):
            problems.append(f"an upload of {original!r} was named {name!r}")
    listed = sorted({n for n in log.folder_names if log.folder_names.count(n) > 1})
    if listed:
        problems.append(f"the folder lists these names more than once: {listed}")
    if log.open_after is not None and log.open_after != log.open_before:
        problems.append(
            f"detaching the folder from one agent changed another's open files: "
            f"{sorted(log.open_before)} before, {sorted(log.open_after)} after"
        )
    if log.detached_listed:
        problems.append(f"the agent the folder was detached from lists {log.detached_listed} files")
    if log.folder_gone is not None and log.folder_gone != (0, 0, False):
        files, named, attached = log.folder_gone
        problems.append(
            f"after the folder's delete an agent lists {files} of its files, {named} folders "
            f"have its name, and it is{'' if attached else ' not'} in the agent's folder_ids"
        )
    if isinstance(log.name_reused, str):
        problems.append(
            f"a folder named as a deleted or renamed one could not be made: {log.name_reused}"
        )
    elif log.name_reused is not None and log.name_reused != (True, True):
        new_id, _ = log.name_reused
        what = "answered an old folder" if not new_id else "lists more than the newest folder"
        problems.append(f"after a delete and a rename, the folder's name {what}")
    if log.archive_names is not None:
        renamed, by_new, by_old = log.archive_names
        if renamed not in by_new or renamed in by_old:
            problems.append(
                f"after {renamed}'s rename, archives.list(name=new) gives {by_new} and "
                f"(name=old) {by_old}"
            )
    if log.archive_gone is not None:
        archive, still_listed, holders = log.archive_gone
        if still_listed or holders:
            problems.append(
                f"archive {archive} deleted, yet listed ({still_listed}) or attached to {holders}"
            )
    if log.error_refused is False and ("notes.txt", "notes.txt") in log.uploads:
        problems.append("an upload of a taken name with duplicate_handling=error was stored")
    if log.skip_name is not None and log.skip_name != "notes.txt":
        problems.append(f"an upload of notes.txt with skip answered the file {log.skip_name!r}")
    if log.replaced is not None:
        old, new, after = log.replaced
        if old in after or new not in after:
            problems.append(
                f"replace: the folder lists {sorted(after)}; {old} must be gone and {new} there"
            )
    return problems[:_MAX]


def check_respelled(log: SurroundingsLog) -> list[str]:
    problems = []
    for query, changed, hits, again in log.respelled:
        same = len(hits) == len(again) and all(
            a[0] == b[0] and abs(a[1] - b[1]) <= _EPS for a, b in zip(hits, again, strict=True)
        )
        if not same:
            problems.append(
                f"a search for {changed!r} answered {list(again)[:3]}, one for {query!r} "
                f"{list(hits)[:3]} (case and stop words must not matter)"
            )
    return problems[:_MAX]


def check_schedules(log: SurroundingsLog, tolerance: float) -> list[str]:
    """Each created schedule's next time is its own (a one-time one's moment; a recurring
    one's cron's next minute after its create, by the oracle's cron model), on create and on
    retrieve; the list is the creation order (``created_at``, then id), pages of one or two
    following ``after`` add up to it with ``has_next_page`` true exactly before the last page;
    a deleted schedule is neither listed nor found."""
    from ._cron_model import cron_model  # the oracle's own reading of cron

    problems: list[str] = []
    for s in log.schedules:
        if s.id is None or s.next_at is None:
            continue
        want_low = want_high = None
        if s.at is not None:
            want_low = want_high = s.at
        elif s.cron is not None and s.acked is not None:
            model = cron_model(s.cron)
            horizon = 60 * 24 * 40
            if not model.fires_at(s.next_at):
                problems.append(
                    f"schedule {s.id} ({s.cron}) next due at {s.next_at}, not a cron minute"
                )
                continue
            want_low = model.next_after(s.sent - tolerance, horizon)
            want_high = model.next_after(s.acked + tolerance, horizon)
        if want_low is None or want_high is None:
            continue
        for what, value in (("created", s.next_at), ("retrieved", s.retrieved)):
            if value is not None and not want_low - 1e-3 <= value <= want_high + 1e-3:
                problems.append(
                    f"schedule {s.id} ({s.cron or s.at}) {what} with next time {value}, "
                    f"not {want_low}" + (f" to {want_high}" if want_high != want_low else "")
                )
    listed = [i for i, _, _ in log.schedule_listed]
    order = sorted(log.schedule_listed, key=lambda r: (r[1], r[2]))
    if [i for i, _, _ in order] != listed:
        problems.append(f"schedules listed out of creation order: {listed}")
    for size, more, pages in log.schedule_pages:
        ids = [i for page in pages for i in page]
        if ids != listed:
            problems.append(f"schedules paged {size} at a time give {ids}, not {listed}")
        want_more = [any(pages[k + 1 :]) for k in range(len(pages))]
        if more != want_more:
            problems.append(
                f"schedule pages of {size} ({[len(p) for p in pages]} schedules): "
                f"has_next_page {more}, not {want_more}"
            )
    for schedule_id, found in log.schedule_gone:
        if found or schedule_id in listed:
            problems.append(f"schedule {schedule_id} deleted, yet still found or listed")
    made = {s.id for s in log.schedules if s.id is not None and not s.deleted}
    missing = sorted(made - set(listed))
    if missing and log.schedule_listed:
        problems.append(f"acknowledged schedules not listed: {missing}")
    return problems[:_MAX]


def check_ties(searches: Iterable[SearchSeen]) -> list[str]:
    """**Equal scores are ordered by passage id, ascending** (docs/embeddings.md: "the result
    therefore never depends on insertion order"). Hits that tie (the same score, to the bit)
    come in id order; and a search whose query embeds to the zero vector (stop words only,
    every passage scores 0) answers exactly the ``top_k`` matching passages of smallest id,
    judged when every passage in scope is certain and the client knows every matching id."""
    problems: list[str] = []
    for s in searches:
        if not s.hit_ids or len(s.hit_ids) != len(s.hits):
            continue
        who = f"search of {s.agent} for {s.query!r} (top_k={s.top_k})"
        for i in range(len(s.hits) - 1):
            if s.hits[i][1] == s.hits[i + 1][1] and s.hit_ids[i] > s.hit_ids[i + 1]:
                problems.append(
                    f"{who}: hits {s.hit_ids[i]} and {s.hit_ids[i + 1]} tie at score "
                    f"{s.hits[i][1]!r} but are not in passage id order"
                )
                break
        if not s.zero_query or s.possible != s.certain:
            continue
        matching = [t for t in s.certain if _filters_pass(s, s.tagged[t], s.created.get(t))]
        ids = [s.ids.get(t) for t in matching]
        known = [i for i in ids if i is not None]
        if len(known) != len(ids) or len(set(known)) != len(known):
            continue
        want = sorted(known)[: s.top_k]
        if list(s.hit_ids) != want:
            problems.append(
                f"{who}: every passage scores 0 for this query, so the hits are the {s.top_k} "
                f"of smallest id {want}, not {list(s.hit_ids)}"
            )
    return problems[:_MAX]


def check_numbered(log: SurroundingsLog) -> list[str]:
    """**A word only one passage holds finds it first.** Words are runs of letters *and
    digits* (docs/embeddings.md), so a search for a number that exactly one passage in scope
    holds (passages alike but for their numbers) answers that passage first, scoring strictly
    above every other hit."""
    problems: list[str] = []
    for number, text, hits in log.numbered:
        if not hits or hits[0][0] != text:
            problems.append(
                f"a search for {number!r} answered {[h[0] for h in hits[:3]]}, not {text!r} "
                "(the one passage holding it) first"
            )
        elif len(hits) > 1 and not hits[0][1] > hits[1][1] + 1e-6:
            problems.append(
                f"a search for {number!r}: {text!r} (the one passage holding it) scored "
                f"{hits[0][1]!r}, no better than {hits[1][0]!r} ({hits[1][1]!r})"
            )
    return problems[:_MAX]


def check_scoped(scoped: Iterable[tuple[str, frozenset[str], frozenset[str]]]) -> list[str]:
    """Each list scoped to an agent holds exactly what the client attached to it."""
    problems: list[str] = []
    for what, want, got in scoped:
        if got != want:
            extra, missing = sorted(got - want), sorted(want - got)
            problems.append(
                f"{what} answered {sorted(got)}: the client attached {sorted(want)} "
                f"(not attached: {extra}; missing: {missing})"
            )
    return problems[:8]


def check_file_pages(walks: Iterable[FilePages]) -> list[str]:
    """Pages put together are the whole list; a page says more follow iff a later one has some."""
    problems: list[str] = []
    for what, size, more, pages, listed in walks:
        ids = [i for page in pages for i in page]
        if ids != listed:
            problems.append(f"{what} paged {size} at a time give {ids}, not {listed}")
        want_more = [any(pages[k + 1 :]) for k in range(len(pages))]
        if more != want_more:
            problems.append(
                f"{what} in pages of {size} ({[len(p) for p in pages]} items): "
                f"more follow {more}, not {want_more}"
            )
    return problems[:_MAX]


def check_content_reads(reads: Iterable[tuple[str, list[tuple[str, str | None]]]]) -> list[str]:
    """A file's content is None until it is parsed, then the whole text it ends with."""
    problems: list[str] = []
    for file_id, seen in reads:
        if not seen or seen[-1][0] != "completed":
            continue  # never finished while polled: nothing to compare with
        final = seen[-1][1]
        if final is None:
            problems.append(f"file {file_id} is completed, yet shows no content")
            continue
        for status, content in seen:
            if content is not None and content != final:
                problems.append(
                    f"file {file_id} ({status}) showed content {content[:40]!r} "
                    f"({len(content)} characters), not its text ({len(final)} characters)"
                )
                break
    return problems[:_MAX]


def check_surroundings(log: SurroundingsLog, tolerance: float = 5.0) -> list[str]:
    return [
        *log.problems[:_MAX],
        *check_searches(log.searches),
        *check_ties(log.searches),
        *check_numbered(log),
        *check_respelled(log),
        *check_identities(log),
        *check_folders(log),
        *check_schedules(log, tolerance),
        *check_scoped(log.scoped),
        *check_file_pages(log.file_pages),
        *check_content_reads(log.content_reads),
    ]
