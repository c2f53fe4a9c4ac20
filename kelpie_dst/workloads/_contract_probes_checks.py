"""The pure checks of the contract walker's probes (``contract_probes``; apiW, session 26).

What a user of the REST API states about four things no other scenario read:

**No request is answered 500** (``no_internal_errors``). The error table (docs/http-api.md,
"Errors") gives every failure the server expects a status of its own (404, 409, 422, a
retryable 503 when storage or the agent's node is unavailable); a 500 is what is left, an
exception no layer meant: a bug. Judged on the server side, from the API app's own report of
each 5xx it answered (its observer's ``api.error`` and ``api.stream_error``), so every request
of the scenario counts, whichever client sent it, including one the client then retried on
another node and got a 200 for.

**A cancel reaches only the runs it names** (``cancels_reach_only_their_runs``). Cancelling a
conversation asks that conversation's runs to stop, and no other: the count it answers is at
most the runs the conversation has, and a run of the agent's own history (or of another
conversation) that no cancel named never ends ``cancelled``.

**A search reads the whole of every text** (``searches_read_whole_texts``). A passage that
holds the word searched for ranks above passages that share nothing with the query, wherever
in the passage the word is: also past the first few hundred characters of a long passage.
A search answers as many hits as it asked for (``top_k`` 0: none, 1: one) when the agent
holds that many passages.

**A deleted file is gone at once** (``file_deletes_at_once``). Right after its delete is
acknowledged, the folder's file is not found (404) and its folder does not list it; so is an
MCP server, and the servers' list.
"""

from __future__ import annotations

import attrs

__all__ = [
    "CancelSeen",
    "DeleteSeen",
    "ProbeLog",
    "RankSeen",
    "SizeSeen",
    "check_cancels",
    "check_file_deletes",
    "check_internal_errors",
    "check_ranks",
]


@attrs.frozen
class CancelSeen:
    """A conversation cancelled while a run of another thread of its agent ran."""

    conversation: str
    own_runs: int  # the runs the cancelled conversation had (at most this many may be asked)
    asked: int | None  # the count the cancel answered (None: no answer)
    other_run: str  # a run of another thread (the agent's own history), started just before
    other_stop: str | None  # its stop reason once it ended (None: it did not end in time)


@attrs.frozen
class RankSeen:
    """A search for a word one passage holds (``want``), with the others sharing nothing."""

    what: str
    want: str
    got: tuple[str, ...]  # the ids the search answered, best first


@attrs.frozen
class SizeSeen:
    """A search asked for at most ``size`` hits."""

    what: str
    size: int
    got: tuple[str, ...]


@attrs.frozen
class DeleteSeen:
    """What the client read right after a file's delete was acknowledged."""

    what: str
    status: int  # the retrieve's status (404 wanted; 0: no answer)
    listed: bool | None  # the folder's list still held it (None: not read)


@attrs.frozen
class ProbeLog:
    cancels: list[CancelSeen] = attrs.field(factory=list)
    ranks: list[RankSeen] = attrs.field(factory=list)
    sizes: list[SizeSeen] = attrs.field(factory=list)
    deletes: list[DeleteSeen] = attrs.field(factory=list)


def check_internal_errors(errors: list[str]) -> list[str]:
    """``errors``: one line per 500 the API app reported (node, method, path, exception)."""
    return [f"answered 500 Internal Server Error: {e}" for e in errors]


def check_cancels(log: ProbeLog) -> list[str]:
    problems: list[str] = []
    for c in log.cancels:
        if c.asked is not None and c.asked > c.own_runs:
            problems.append(
                f"cancelling conversation {c.conversation} (it had {c.own_runs} run(s)) asked "
                f"{c.asked} run(s) to stop: it reached runs it does not name"
            )
        if c.other_stop == "cancelled":
            problems.append(
                f"run {c.other_run} of the agent's own history ended cancelled, but the only "
                f"cancel sent named conversation {c.conversation}"
            )
    return problems


def check_ranks(log: ProbeLog) -> list[str]:
    problems: list[str] = []
    for r in log.ranks:
        if not r.got or r.got[0] != r.want:
            shown = ", ".join(r.got[:4]) or "nothing"
            problems.append(
                f"{r.what}: answered [{shown}] first, not {r.want}, the only passage holding "
                "the word searched for"
            )
    for s in log.sizes:
        if len(s.got) != min(s.size, 5):  # five passages hold or miss the word: all answer
            problems.append(f"{s.what}: answered {len(s.got)} hit(s), want {min(s.size, 5)}")
    return problems


def check_file_deletes(log: ProbeLog) -> list[str]:
    problems: list[str] = []
    for d in log.deletes:
        if d.status and d.status != 404:
            problems.append(f"{d.what}: retrieved at once after its delete, answered {d.status}")
        if d.listed:
            problems.append(f"{d.what}: still listed at once after its delete")
    return problems
