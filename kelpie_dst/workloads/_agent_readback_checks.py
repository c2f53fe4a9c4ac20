"""The properties of ``readback`` (``readback_consistent``): what one client made and changed,
read back through every route that shows it, and every list it read judged by Letta's
documented list semantics against the lists themselves.

Pure functions of a :class:`ReadbackLog` (``tests/workloads/test_agent_readback.py``); the
walker that fills it is :mod:`._agent_readback`. Five properties, each judged wherever the
client read something, never tuned to one route:

* **every route shows what was written** (:attr:`ReadbackLog.shown`): each time a route answers
  a thing the client made (an answer to its create or change, a retrieve, a list item, a search
  hit), every field the client set is shown as the client last set it: a passage's text and
  tags, an archive's name and description, a scheduled message's messages (role, content,
  name, otid) and moment, an agent's tags and attached identities, a run's conversation;
* **a list is the same read any way** (:attr:`ReadbackLog.orders`, :attr:`ReadbackLog.walks`):
  newest first is the reverse of oldest first, and a list paged by ``after`` or ``before``
  cursors, either order, in pages smaller than it, lists it exactly (``_agent_lists.walk``);
* **a filter keeps what it names, before the limit** (:attr:`ReadbackLog.filtered`): a list
  read with a filter and a ``limit`` is the first ``limit`` items of the unfiltered list (read
  in one page, the same order) that the filter names, whatever the filter (an agent, a name,
  a substring, a tag, a cursor);
* **an answer holds the agent's messages, not the input** (:attr:`ReadbackLog.answers`): a
  send's ``LettaResponse.messages`` has no ``user_message`` (the input is in the history, not
  echoed), and the history shows the input with the ``otid`` it was sent with;
* **made once** (:attr:`ReadbackLog.once`): a create answered on the client's first attempt
  (no other attempt sent) made one thing, so one read of the list shows it once;
* **a change moves updated_at** (:attr:`ReadbackLog.stamps`): every answer about a thing shows
  the same ``created_at``, and the answer to a change (an update) shows an ``updated_at`` other
  than the one shown before it (judged by difference, not order: nodes' clocks may skew).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._agent_lists import Walk, check_walks

__all__ = ["Filtered", "ReadbackLog", "Shown", "Stamp", "check_readback", "check_stamps"]


@attrs.define
class Shown:
    """One thing as a route showed it: ``key`` names it in the model (``passage:<text>``,
    ``archive:<id>``...), ``fields`` what the route showed, ``want`` what the client had set
    when it asked (the model then; ``None``: the thing is not the client's)."""

    route: str
    key: str
    fields: dict[str, Any]
    want: dict[str, Any] | None = None


@attrs.define
class Filtered:
    """A list read with a filter and a limit (``got``, ids in its order), and the same list read
    in one page unfiltered in that order (``full``) with the ids the filter names (``keep``)."""

    what: str
    got: list[str]
    full: list[str]
    keep: set[str]
    limit: int
    nearest_end: bool = False  # a ``before`` cursor alone: the items nearest it (the last ones)


@attrs.define
class Stamp:
    """A thing's timestamps as one route showed them (``None``: not shown); ``change``: the
    route's answer is to a change of the thing."""

    route: str
    key: str
    created_at: Any
    updated_at: Any
    change: bool = False


@attrs.define
class ReadbackLog:
    problems: list[str] = attrs.Factory(list)
    # key -> field -> the value the client last set (the model; each Shown keeps a copy)
    model: dict[str, dict[str, Any]] = attrs.Factory(dict)
    shown: list[Shown] = attrs.Factory(list)
    # (what, oldest first, newest first): ids of one list read in one page each way
    orders: list[tuple[str, list[str], list[str]]] = attrs.Factory(list)
    walks: list[tuple[str, list[str], list[Walk]]] = attrs.Factory(list)
    filtered: list[Filtered] = attrs.Factory(list)
    # (what, the answer's message types)
    answers: list[tuple[str, list[str]]] = attrs.Factory(list)
    # (what, the ids or texts a list must hold exactly (as a set), what it held)
    members: list[tuple[str, list[str], list[str]]] = attrs.Factory(list)
    # (what, what the client made once on a first attempt, what one read of the list held):
    # each of the first must be in the second exactly once (no repeated create made two)
    once: list[tuple[str, list[str], list[str]]] = attrs.Factory(list)
    unsettled: list[str] = attrs.Factory(list)  # lists that changed while read (not judged)
    stamps: list[Stamp] = attrs.Factory(list)  # in the order the client read them


def _norm(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return [_norm(v) for v in value]
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _norm(v) for k, v in value.items()}
    return value


def check_shown(shown: Sequence[Shown]) -> list[str]:
    problems = []
    for s in shown:
        want = s.want
        if want is None:
            continue  # not the client's (or not made by it: nothing to judge)
        for field, value in s.fields.items():
            if field in want and _norm(value) != _norm(want[field]):
                problems.append(
                    f"{s.route}: {s.key} shows {field}={_norm(value)!r}, "
                    f"but the client set {_norm(want[field])!r}"
                )
    return problems


def check_orders(orders: Sequence[tuple[str, list[str], list[str]]]) -> list[str]:
    return [
        f"{what}: newest first {desc} is not oldest first {asc} reversed"
        for what, asc, desc in orders
        if list(desc) != list(asc)[::-1]
    ]


def check_filtered(items: Sequence[Filtered]) -> list[str]:
    problems = []
    for f in items:
        kept = [i for i in f.full if i in f.keep]
        want = (kept[-f.limit :] if f.limit else []) if f.nearest_end else kept[: f.limit]
        if list(f.got) != want:
            problems.append(
                f"{f.what}: got {f.got}, but the unfiltered list {f.full} holds {want} "
                f"first among those the filter names (limit {f.limit})"
            )
    return problems


def check_answers(answers: Sequence[tuple[str, list[str]]]) -> list[str]:
    return [
        f"{what}: the answer echoes the input ({types}): LettaResponse.messages holds the "
        "agent's messages only"
        for what, types in answers
        if "user_message" in types
    ]


def check_members(members: Sequence[tuple[str, list[str], list[str]]]) -> list[str]:
    problems = []
    for what, want, got in members:
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        if missing or extra:
            problems.append(f"{what}: missing {missing}, not expected {extra} (got {got})")
    return problems


def check_once(once: Sequence[tuple[str, list[str], list[str]]]) -> list[str]:
    """A create the server answered on the client's first attempt (no other attempt sent)
    made one thing: a list shows it once, whatever the server retried inside."""
    problems = []
    for what, made, got in once:
        twice = sorted(t for t in set(made) if got.count(t) > 1)
        if twice:
            problems.append(f"{what}: made once, listed more than once: {twice}")
    return problems


def check_stamps(stamps: Sequence[Stamp]) -> list[str]:
    """``created_at`` never changes; a change's answer shows a new ``updated_at``."""
    problems = []
    created: dict[str, tuple[str, Any]] = {}
    updated: dict[str, tuple[str, Any]] = {}
    for s in stamps:
        if s.created_at is not None:
            first = created.setdefault(s.key, (s.route, s.created_at))
            if first[1] != s.created_at:
                problems.append(
                    f"{s.route}: {s.key} shows created_at={s.created_at}, but {first[0]} "
                    f"showed {first[1]}"
                )
        if s.updated_at is None:
            continue
        before = updated.get(s.key)
        if s.change and before is not None and before[1] == s.updated_at:
            problems.append(
                f"{s.route}: {s.key} was changed, but its updated_at={s.updated_at} is the "
                f"one {before[0]} showed before the change"
            )
        updated[s.key] = (s.route, s.updated_at)
    return problems


def check_readback(log: ReadbackLog) -> list[str]:
    """Every problem of the log (empty: the properties hold)."""
    problems = list(log.problems)
    problems += check_shown(log.shown)
    problems += check_orders(log.orders)
    for what, reference, walks in log.walks:
        problems += check_walks(what, reference, walks)
    problems += check_filtered(log.filtered)
    problems += check_answers(log.answers)
    problems += check_members(log.members)
    problems += check_once(log.once)
    problems += check_stamps(log.stamps)
    return problems
