"""The judge of ``agent_collections``: collections larger than any page the server reads them in.

The server reads its collections in chunks (the agent index and the record scans 200 keys at a
time, the agent runtime's scans 500, deletes write 200 keys a transaction), and a client reads
them in pages of its own. A chunk boundary is where an off-by-one hides: a scan that takes a
full chunk for the last one stops early, a batch that skips its last key leaves one behind, a
cursor that steps over the boundary repeats or drops an entry. Every collection here is larger
than the largest chunk, so each boundary is crossed, and each property is one a client sees:

- **listings are whole**: every agent (and every block) a create acknowledged is listed, no id
  twice; the two orders are each other's reverse; a walk by ``after`` cursors in pages gives
  the one-shot listing, each page full but the last; a tag filter keeps exactly the listed
  agents that carry the tag;
- **repair changes nothing the service wrote**: the listing and every agent's history read the
  same after ``repair`` as before it;
- **a long history is whole**: an imported history of more messages than any chunk reads back
  in full, in order, once each (one-shot, paged both ways); a search finds its last message;
  an export carries every message; a reset, and a delete, leave none of them readable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs

__all__ = ["CollectionsLog", "Listing", "check_collections"]


@attrs.frozen
class Listing:
    """One collection as the client read it: ``full`` in one request (``limit`` 1000), ``desc``
    the same in the other order, ``walk`` by ``after`` cursors in pages (their sizes)."""

    what: str
    full: tuple[str, ...]
    desc: tuple[str, ...]
    walk: tuple[str, ...]
    pages: tuple[int, ...]
    page: int


@attrs.define
class CollectionsLog:
    page: int = 0
    acked: list[str] = attrs.Factory(list)  # agents whose create was acknowledged, in order
    blocks: list[str] = attrs.Factory(list)  # the blocks those creates answered with
    listings: list[Listing] = attrs.Factory(list)
    # (tag, the ids the filter listed, the ids of the full listing whose agent has the tag)
    tagged: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = attrs.Factory(list)
    before_repair: tuple[str, ...] = ()
    after_repair: tuple[str, ...] = ()
    # agent -> its history's message ids before repair, and after it
    histories: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = attrs.Factory(dict)
    notes: tuple[str, ...] = ()  # the texts of the imported history, in order
    big: str = ""  # the imported agent
    big_texts: tuple[str, ...] = ()  # its user messages' texts as one listing shows them
    forked: tuple[str, ...] = ()  # the user messages' texts of a fork of its history
    fork_lost: str = ""  # the fork a fork request answered with is not found: why
    found: tuple[str, ...] = ()  # what a search for the last note's word found (texts)
    exported: int = -1  # user messages in the big agent's export carrying a note
    # (when, note ids still readable, note texts still in the history)
    leftovers: list[tuple[str, tuple[str, ...], int]] = attrs.Factory(list)


def _listing_problems(seen: Listing) -> list[str]:
    problems: list[str] = []
    what = seen.what
    repeated = sorted(i for i, n in Counter(seen.full).items() if n > 1)
    if repeated:
        problems.append(f"{what}: {len(repeated)} id(s) listed twice, e.g. {repeated[0]}")
    if seen.desc != tuple(reversed(seen.full)):
        problems.append(
            f"{what}: the descending listing ({len(seen.desc)}) is not the ascending one "
            f"({len(seen.full)}) reversed"
        )
    if seen.walk != seen.full:
        at = next(
            (i for i, (a, b) in enumerate(zip(seen.walk, seen.full, strict=False)) if a != b),
            min(len(seen.walk), len(seen.full)),
        )
        problems.append(
            f"{what}: a walk in pages of {seen.page} gave {len(seen.walk)} ids, the one-shot "
            f"listing {len(seen.full)}; they part at position {at}"
        )
    short = [i for i, n in enumerate(seen.pages[:-1]) if n != seen.page]
    if short:
        problems.append(
            f"{what}: page {short[0]} of a walk has {seen.pages[short[0]]} ids, not "
            f"{seen.page}, and is not the last"
        )
    return problems


def _missing(what: str, wanted: Sequence[str], shown: Sequence[str]) -> list[str]:
    have = set(shown)
    gone = [i for i in wanted if i not in have]
    if not gone:
        return []
    return [f"{what}: {len(gone)} of {len(wanted)} acknowledged are not listed, e.g. {gone[0]}"]


def check_collections(log: CollectionsLog) -> list[str]:
    """Every problem with what ``agent_collections``'s client saw (see the module docstring)."""
    problems: list[str] = []
    for seen in log.listings:
        problems += _listing_problems(seen)
        if seen.what.startswith("agents"):
            problems += _missing(seen.what, log.acked, seen.full)
        elif seen.what.startswith("blocks"):
            problems += _missing(seen.what, log.blocks, seen.full)
    for tag, listed, wanted in log.tagged:
        if listed != wanted:
            problems.append(
                f"agents tagged {tag!r}: the filter listed {len(listed)}, the full listing "
                f"has {len(wanted)} with the tag"
            )
    if log.after_repair != log.before_repair:
        lost = [i for i in log.before_repair if i not in set(log.after_repair)]
        problems.append(
            f"repair changed the agent listing: {len(log.before_repair)} before, "
            f"{len(log.after_repair)} after"
            + (f", {len(lost)} gone (e.g. {lost[0]})" if lost else "")
        )
    changed = [a for a, (was, now) in log.histories.items() if was != now]
    if changed:
        was, now = log.histories[changed[0]]
        problems.append(
            f"repair changed {len(changed)} agents' histories, e.g. {changed[0]}: "
            f"{len(was)} messages before, {len(now)} after"
        )
    if log.big:
        problems += _history_problems(log)
    return problems


def _history_problems(log: CollectionsLog) -> list[str]:
    problems: list[str] = []
    notes = log.notes
    shown = tuple(t for t in log.big_texts if t in set(notes))
    if shown != notes:
        counts = Counter(shown)
        missing = [t for t in notes if counts[t] == 0]
        twice = [t for t, n in counts.items() if n > 1]
        problems.append(
            f"the imported history of {len(notes)} notes shows {len(shown)}"
            + (f"; missing e.g. {missing[0]!r}" if missing else "")
            + (f"; twice e.g. {twice[0]!r}" if twice else "")
            + ("; out of order" if not missing and not twice else "")
        )
    if log.fork_lost:
        problems.append(f"the fork just made of the imported history is not found: {log.fork_lost}")
    forked = tuple(t for t in log.forked if t in set(notes))
    if log.forked and forked != notes:
        problems.append(f"a fork of the imported history of {len(notes)} notes shows {len(forked)}")
    if notes and notes[-1] not in log.found:
        problems.append(
            f"a search for the last note's word found {len(log.found)} message(s), not "
            f"{notes[-1]!r}"
        )
    if log.exported != -1 and log.exported != len(notes):
        problems.append(f"the export of the imported agent carries {log.exported} of its notes")
    for when, readable, in_history in log.leftovers:
        if readable or in_history:
            problems.append(
                f"after {when}: {len(readable)} note(s) still readable by id"
                + (f" (e.g. {readable[0]})" if readable else "")
                + f", {in_history} still in the history"
            )
    return problems
