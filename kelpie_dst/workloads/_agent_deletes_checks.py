"""The property of ``deletes`` (``deletes_are_total``): a delete the server acknowledged is
total and lasting, and touches nothing else.

Pure functions of a :class:`DeletesLog` (``tests/workloads/test_agent_deletes.py``); the walker
that fills it is :mod:`._agent_deletes`. Judged wherever the client read something, in both
rounds of its read-back (at once, and five virtual seconds later):

* **gone from its retrieve**: a thing whose delete was acknowledged answers 404 (its passages,
  for an archive, are gone from the agent's archival memory);
* **gone from every list and agent that showed it**: the top-level lists, the agent's own
  lists (tools, blocks, folders, conversations, schedules, passages, archives) and its state;
* **nothing else went**: a thing never deleted is still retrievable, and still in every list of
  its kind the client read (with a limit above what it made);
* **a detach touches the agent only** (with ``detaches``): a block or tool detached from the
  walker's agent is judged as deleted on the agent's own views (kind ``agent block``,
  ``agent tool``: what was deleted is gone from them too), and as never deleted everywhere
  else;
* **a delete of what is gone is a 404**: each delete sent once more after both read-backs is
  answered 404, as Letta answers it (a 2xx would tell a client it deleted something).
"""

from __future__ import annotations

import attrs

__all__ = ["DeletesLog", "check_deletes"]


@attrs.define
class DeletesLog:
    """What the delete walker made, deleted and saw."""

    made: dict[str, list[str]] = attrs.field(factory=dict)  # kind -> ids, in order made
    deleted: dict[str, list[str]] = attrs.field(factory=dict)  # kind -> ids, acknowledged
    # (route, kind, id, found): a retrieve's answer (found: 2xx; not: 404)
    retrieved: list[tuple[str, str, str, bool]] = attrs.field(factory=list)
    # (route, kind, ids shown, ids of the kind that would show had nothing been deleted)
    listed: list[tuple[str, str, list[str], list[str]]] = attrs.field(factory=list)
    # (route, kind, id, answered 404, a fault fired meanwhile): each delete sent once more,
    # after both read-backs
    again: list[tuple[str, str, str, bool, bool]] = attrs.field(factory=list)
    regone: list[str] = attrs.field(factory=list)  # a retried delete found its thing gone
    problems: list[str] = attrs.field(factory=list)  # requests the client must not retry
    round: str = "at once"


def check_deletes(log: DeletesLog) -> list[str]:
    """The problems (empty: every delete was total, lasting and touched nothing else)."""
    out = list(log.problems)
    gone = {kind: set(ids) for kind, ids in log.deleted.items()}
    for kind in ("block", "tool"):  # a thing deleted is gone from the agent's views as well
        gone[f"agent {kind}"] = gone.get(f"agent {kind}", set()) | gone.get(kind, set())
    for route, kind, thing, found in log.retrieved:
        was_deleted = thing in gone.get(kind, set())
        if was_deleted and found:
            out.append(f"{route}: the {kind} is still there after its delete was acknowledged")
        elif not was_deleted and not found:
            out.append(f"{route}: 404 for a {kind} never deleted")
    for route, kind, _, answered_404, faulted in log.again:
        # A fault during the request may leave its first attempt's outcome unknown; the
        # service then settles the retry by what it finds (the thing is gone: 2xx), as its
        # documented rule says (Dlead25-2). Only a fault-free repeat must be a 404.
        if not answered_404 and not faulted:
            out.append(f"{route}: a delete of a {kind} already deleted was answered 2xx, not 404")
    for route, kind, shown, universe in log.listed:
        deleted = gone.get(kind, set())
        seen = set(shown)
        for thing in sorted(seen & deleted):
            out.append(f"{route}: lists the {kind} {thing}, deleted (acknowledged)")
        for thing in universe:
            if thing not in deleted and thing not in seen:
                out.append(f"{route}: the {kind} {thing} is missing, never deleted")
    return out
