"""The WIRE CONTRACT oracle's pure checks (``contract``, via HTTP; ``_agent_contract`` drives).

What a user of kelpie_agent's server can state from the documentation alone (docs/http-api.md,
"Authentication", "Pagination", "Streaming"; docs/http-server.md, "Options"), each judged
against the walker's own reads, never against a server helper:

**An API key is required everywhere it is documented** (``api_key_enforced``). With the key
set, every route but ``GET /v1/health/`` answers 401 with a JSON ``detail`` and
``x-should-retry: false`` to a request without ``Authorization``, with another scheme
(``Basic``, none at all), or with another key (one character changed, one more, one less,
empty), the schema and documentation routes included; a write refused so is not applied
(the block keeps its value, no block is created, the block to delete is still there). The
health route answers without the key; every request with the key is served (the rest of the
scenario).

**List parameters mean what the documentation says** (``list_parameters_documented``). A
list read without ``order`` or ``limit`` is the list read with the documented defaults
(agents ``limit=50, order=desc``; messages ``limit=100, order=desc``; blocks and tools
``limit=50, order=asc``; runs and steps newest first); read ``desc`` it is the ``asc`` read
reversed; every ``limit`` from 0 to 1000 is served (``limit=1000`` lists what an unlimited
read lists, ``limit=0`` nothing) and 1001 is a 422. Two reads are compared only when a third
read, after them, agrees with the first (the list did not change in between). With
``contract_edges`` the same limits hold for the lists below an agent and for both searches
(``top_k=0``/``limit=0``: nothing; 1001: a 422), and a list filtered to one agent
(``agent_id`` on steps, runs and the passage search; an agent's own archival search) holds
only that agent's items (``_contract_edges``).

**A file is stored whole** (``uploads_read_back_whole``; with ``contract_uploads``). A file
uploaded to a folder is read back with the size the client sent (``file_size``), and, once
processed, with the text it sent (``include_content=true``), whatever its size
(``_contract_uploads``: around 8, 64, 128 and 270 KiB).

**A stream carries its run, pings or not** (``quiet_streams_complete``). Every stream the
server finished (the connection ended cleanly) ends with ``stop_reason`` then
``usage_statistics``, with or without ``include_pings``, also when the run was slower than
the server's ping interval to produce its first event; and its message frames are exactly
the run's stored messages other than its inputs (by id).

**A refusal answers the status the error table names** (``refusals_documented``). A
well-formed request the state refuses is a 400 (an archival search whose start is after its
end, an approval when no call waits for one, deleting a built-in tool), an unknown cursor a
404, a value the schema refuses a 422; each with a JSON ``detail`` and ``x-should-retry:
false``.

**The head limit is exact** (``http_limits_exact``). A request head of exactly
``max_header_bytes`` is served; one byte more is a 431 with a JSON ``detail`` and
``connection: close``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = [
    "AuthSeen",
    "ContractLog",
    "ListSeen",
    "ScopeSeen",
    "StatusSeen",
    "StreamSeen",
    "UploadSeen",
    "check_auth",
    "check_limits",
    "check_lists",
    "check_refusals",
    "check_streams",
    "check_uploads",
]


@attrs.frozen
class AuthSeen:
    """One request with a credential: its answer (``status`` 0: none came)."""

    what: str
    credential: str  # how it was sent ("none", "Basic <key>", "the key with one more", ...)
    want: int  # 401, or 200 (the health route, the right key)
    status: int
    detail: bool  # a JSON {"detail": "..."} body
    retry: str | None  # x-should-retry


@attrs.frozen
class ListSeen:
    """Two reads a documented rule says are equal (ids in order)."""

    what: str
    want: tuple[str, ...]
    got: tuple[str, ...]


@attrs.frozen
class ScopeSeen:
    """A list filtered to one agent (``agent_id``, or an agent's own route): the agent each
    item it answered belongs to (``contract_edges``)."""

    what: str
    agent: str
    owners: tuple[str, ...]


@attrs.frozen
class StatusSeen:
    """A request whose status the documentation names (``got`` 0: none came)."""

    what: str
    want: int
    got: int
    detail: bool = True  # a JSON detail, where an error was answered
    closed: bool | None = None  # the connection was closed after it (None: not asked)
    retry: str | None = "false"  # x-should-retry, where an error was answered


@attrs.frozen
class StreamSeen:
    """A stream the server finished: its frames in order and the run's stored messages."""

    what: str
    pings: bool  # sent with include_pings
    quiet: bool  # its first frame came after the server's ping interval
    endings: tuple[str, ...]  # stop_reason, usage_statistics, error (in order)
    frames: tuple[str, ...]  # ids of its message frames, in order
    stored: tuple[str, ...] | None  # the run's stored messages but its inputs (None: unread)
    run_id: str | None


@attrs.frozen
class UploadSeen:
    """A file uploaded to a folder, read back (``contract_uploads``)."""

    what: str
    sent: int  # the bytes the client sent
    size: int  # the file_size read back
    status: str  # its processing_status when read back
    same: bool | None  # its content is the text sent (None: no content was answered)
    length: int | None  # the length of the content read back


@attrs.frozen
class ContractLog:
    auth: list[AuthSeen] = attrs.field(factory=list)
    not_applied: list[str] = attrs.field(factory=list)  # refused writes found applied
    lists: list[ListSeen] = attrs.field(factory=list)
    statuses: list[StatusSeen] = attrs.field(factory=list)
    limits: list[StatusSeen] = attrs.field(factory=list)
    refusals: list[StatusSeen] = attrs.field(factory=list)
    streams: list[StreamSeen] = attrs.field(factory=list)
    scoped: list[ScopeSeen] = attrs.field(factory=list)
    uploads: list[UploadSeen] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)  # requests that failed for good


def check_auth(log: ContractLog) -> list[str]:
    problems: list[str] = []
    for seen in log.auth:
        if not seen.status:
            continue
        if seen.status != seen.want:
            problems.append(
                f"{seen.what} with {seen.credential}: answered {seen.status}, want {seen.want}"
            )
        elif seen.want == 401 and not seen.detail:
            problems.append(f"{seen.what} with {seen.credential}: a 401 without a JSON detail")
        elif seen.want == 401 and seen.retry != "false":
            problems.append(
                f"{seen.what} with {seen.credential}: a 401 with x-should-retry {seen.retry!r}"
            )
    problems += log.not_applied
    return problems


def check_lists(log: ContractLog) -> list[str]:
    problems: list[str] = []
    for seen in log.lists:
        if seen.got != seen.want:
            problems.append(f"{seen.what}: got {_ids(seen.got)}, want {_ids(seen.want)}")
    for scope in log.scoped:
        strays = sorted({o for o in scope.owners if o != scope.agent})
        if strays:
            problems.append(f"{scope.what}: answered items of {strays}, not only {scope.agent}'s")
    problems += _statuses(log.statuses)
    return problems


def check_limits(log: ContractLog) -> list[str]:
    return _statuses(log.limits)


def check_refusals(log: ContractLog) -> list[str]:
    return _statuses(log.refusals)


def _statuses(seen: Sequence[StatusSeen]) -> list[str]:
    problems: list[str] = []
    for s in seen:
        if not s.got:
            continue
        if s.got != s.want:
            problems.append(f"{s.what}: answered {s.got}, want {s.want}")
        elif s.want >= 400 and not s.detail:
            problems.append(f"{s.what}: a {s.got} without a JSON detail")
        elif s.want >= 400 and s.closed is False:
            problems.append(f"{s.what}: a {s.got} that left the connection open")
        elif s.want >= 400 and s.retry != "false":
            problems.append(f"{s.what}: a {s.got} with x-should-retry {s.retry!r}")
    return problems


def check_uploads(log: ContractLog) -> list[str]:
    problems: list[str] = []
    for seen in log.uploads:
        if seen.size != seen.sent:
            problems.append(
                f"uploaded {seen.what}: {seen.sent} bytes sent, file_size {seen.size} read back"
            )
        if seen.status == "completed" and seen.same is not True:
            got = "no content" if seen.length is None else f"{seen.length} other characters"
            problems.append(
                f"uploaded {seen.what}: processed, but its content is {got}, not the "
                f"{seen.sent} sent"
            )
    return problems


def check_streams(log: ContractLog) -> list[str]:
    problems: list[str] = []
    for s in log.streams:
        how = f"{s.what} (include_pings={s.pings}, {'quiet' if s.quiet else 'prompt'} start)"
        if "error" in s.endings:
            continue  # an error frame says how it ended (judged by every_request_completed)
        if s.endings[-2:] != ("stop_reason", "usage_statistics"):
            problems.append(
                f"{how}: the stream ended with {list(s.endings)}, not stop_reason then "
                f"usage_statistics ({len(s.frames)} message frames)"
            )
            continue
        if s.stored is not None and sorted(s.frames) != sorted(s.stored):
            problems.append(
                f"{how}: message frames {_ids(s.frames)}, but run {s.run_id} stored "
                f"{_ids(s.stored)}"
            )
    return problems


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:6])
    return f"[{shown}{', ...' if len(ids) > 6 else ''}] ({len(ids)})"
