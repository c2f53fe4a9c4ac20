"""The CATALOG oracle's pure checks (``catalog``, via HTTP; ``_agent_catalog`` drives).

What a user of Letta's REST API would state about the shared catalog (archives, folders,
standalone blocks, scheduled messages), agent files and message search, each judged against
the workload's own model or the documented contract (docs/http-api.md, docs/letta-compat.md),
never against a server helper:

* **A block made without a limit has Letta's default limit** (20,000 characters,
  ``CORE_MEMORY_BLOCK_CHAR_LIMIT``), as ``blocks.create`` answers it and as it reads back.
* **A PATCH of an agent's block changes what it gives, and only that.** After each ``PATCH
  /v1/agents/{id}/core-memory/blocks/{label}`` giving a random subset of the fields, the
  answer and a read after it are the model: the fields given have their new values, every
  omitted field (a description, metadata, a limit) keeps its value.
* **Every list reads the same in pages, both ways.** The archives, a folder's agents and a
  block's agents, read in one page oldest first, are the *reference*; read newest first it is
  the reference reversed; every walk in pages of one or two (``after`` cursors from the start,
  or ``before`` cursors from the end) is exactly that sequence: no repeat, no gap, no page over
  its ``limit``. The archives' reference is sorted by the ``created_at`` it shows (then id).
* **A list holds what was made, and a filter keeps exactly what it names.** A folder's agents
  and a block's agents are exactly the agents the workload attached it to; ``archives.list``
  by ``agent_id`` is exactly the archives attached to that agent, and by ``name`` exactly the
  archive of that name; ``tools.list(search=...)`` with a part of a tool's name (any case)
  lists that tool.
* **Scheduled messages page exactly.** Read ``limit`` at a time, following ``after`` (the last
  id of the page), the pages add up to the unpaged list, each holds at most ``limit``, and
  ``has_next_page`` is true exactly when a schedule follows the page; the unpaged list holds
  every schedule the workload made, once.
* **Import then export gives back the document.** The client writes an agent file (blocks
  with limits, descriptions, read-only flags and metadata; a custom tool with its tags,
  ``return_char_limit`` and ``default_requires_approval``; tool rules; a folder with a file
  open at a window of lines; a history), imports it, and exports the agent it got: the
  export holds what the document held, field for field (the agent's name is the one the
  import asked for; the folder's name may gain a suffix, as Letta's duplicate handling does;
  attaching a folder adds Letta's file tools, and nothing else is added). An import whose
  answer the client never got (cut by a crash; the copy then found by name) is judged on what
  the create commits with the agent only: its folders and open files are attached afterwards,
  each in a transaction of its own.
* **Full-text search ranks by the share of the query's words a message has.** Over a history
  the workload wrote (``messages.search(search_mode="fts")`` scoped to that agent), every hit
  has at least one of the query's words, hits come in non-increasing share (ties by message
  id), there are at most ``limit`` of them, no message left out has a higher share than one
  listed, and with room to spare every message with a query word is listed.

:func:`check_catalog` is the pure checker (``tests/workloads/test_agent_catalog.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from ._agent_lists import Walk, check_walks

__all__ = [
    "LETTA_BLOCK_LIMIT",
    "CatalogLog",
    "ScheduleWalk",
    "SearchSeen",
    "align_export",
    "check_catalog",
    "fts_share",
    "normal_agent_file",
]

LETTA_BLOCK_LIMIT = 20_000
"""Letta's default block limit (``CORE_MEMORY_BLOCK_CHAR_LIMIT``)."""

FILE_TOOL_TYPE = "letta_files_core"
"""The type of the file tools attaching a folder adds (Letta's ``open_files`` etc.)."""

AFTER_CREATE = frozenset(["folders", "files", "open"])
"""What an import attaches after it creates the agent (each folder, then each open file, in
transactions of their own, as ``agents.create(folder_ids=...)`` does): an import cut between
them leaves an agent without them, so a copy found by name after an unknown outcome is not
judged on them."""

_WORD = re.compile(r"[a-z0-9]+")


@attrs.frozen
class ScheduleWalk:
    """``agents.schedule.list`` read ``limit`` at a time: each page's ids and its
    ``has_next_page``."""

    limit: int
    pages: tuple[tuple[tuple[str, ...], bool], ...]


@attrs.frozen
class SearchSeen:
    """One full-text search: the query, its limit, the hits (message id, text) in the order
    answered, and every message of the searched history the workload wrote (id, text)."""

    query: str
    limit: int
    hits: tuple[tuple[str, str], ...]
    written: tuple[tuple[str, str], ...]


@attrs.define
class CatalogLog:
    problems: list[str] = attrs.Factory(list)  # requests that failed for good
    block_limits: list[tuple[str, int]] = attrs.Factory(list)  # (what, limit shown)
    references: dict[str, tuple[str, ...]] = attrs.Factory(dict)  # list -> one page, asc
    references_desc: dict[str, tuple[str, ...]] = attrs.Factory(dict)  # one page, desc
    stamps: dict[str, tuple[tuple[float, str], ...]] = attrs.Factory(dict)  # (created_at, id)
    walks: list[tuple[str, list[Walk]]] = attrs.Factory(list)  # (list, its walks)
    # (what, listed ids, wanted ids): a list or filter that must hold exactly ``wanted``
    members: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = attrs.Factory(list)
    # (what, listed ids, an id it must hold)
    contains: list[tuple[str, tuple[str, ...], str]] = attrs.Factory(list)
    schedules_made: tuple[str, ...] = ()
    schedules_ref: tuple[str, ...] = ()
    schedule_walks: list[ScheduleWalk] = attrs.Factory(list)
    # (what, the document written, the document exported, the name the import asked for)
    round_trips: list[tuple[str, dict[str, Any], dict[str, Any], str]] = attrs.Factory(list)
    # round trips whose import's outcome the client never learnt (the copy was found by name
    # after a cut attempt): judged on what the create commits with the agent only
    unsure: list[str] = attrs.Factory(list)
    searches: list[SearchSeen] = attrs.Factory(list)
    # (what, the block as shown, the model): an agent's block after each PATCH
    patches: list[tuple[str, dict[str, Any], dict[str, Any]]] = attrs.Factory(list)


# -- block defaults --------------------------------------------------------------------------
def _check_block_limits(log: CatalogLog) -> list[str]:
    return [
        f"{what}: limit {limit}, want Letta's default {LETTA_BLOCK_LIMIT}"
        for what, limit in log.block_limits
        if limit != LETTA_BLOCK_LIMIT
    ]


def _check_patches(log: CatalogLog) -> list[str]:
    return [f"{what}: {got}, want {want}" for what, got, want in log.patches if got != want]


# -- lists -----------------------------------------------------------------------------------
def _check_walks(log: CatalogLog) -> list[str]:
    out: list[str] = []
    for what, ref in log.references.items():
        desc = log.references_desc.get(what)
        if desc is not None and list(desc) != list(ref)[::-1]:
            out.append(f"{what}: newest first {list(desc)}, want {list(ref)[::-1]}")
        if len(set(ref)) != len(ref):
            out.append(f"{what}: the one-page listing repeats an id: {list(ref)}")
    for what, stamps in log.stamps.items():
        if list(stamps) != sorted(stamps):
            out.append(f"{what}: not sorted by (created_at, id): {list(stamps)}")
    for what, walks in log.walks:
        reference = log.references.get(what)
        if reference is not None:
            out += check_walks(what, reference, walks)
    return out


def _check_members(log: CatalogLog) -> list[str]:
    out: list[str] = []
    for what, listed, wanted in log.members:
        if len(set(listed)) != len(listed):
            out.append(f"{what}: lists an id twice: {list(listed)}")
        if set(listed) != set(wanted):
            extra = sorted(set(listed) - set(wanted))
            missing = sorted(set(wanted) - set(listed))
            out.append(f"{what}: lists {extra} it should not, misses {missing}")
    for what, listed, wanted_id in log.contains:
        if wanted_id not in listed:
            out.append(f"{what}: does not list {wanted_id}")
    return out


def _check_schedules(log: CatalogLog) -> list[str]:
    out: list[str] = []
    ref = list(log.schedules_ref)
    for made in log.schedules_made:
        if ref.count(made) != 1:
            out.append(f"agents.schedule.list: schedule {made} listed {ref.count(made)} times")
    for walk in log.schedule_walks:
        where = f"agents.schedule.list(limit={walk.limit}) walked by after"
        got: list[str] = []
        for k, (ids, more) in enumerate(walk.pages):
            if len(ids) > walk.limit:
                out.append(f"{where}: page {k + 1} holds {len(ids)}")
            got += ids
            follows = len(ref) > len(got) if got == ref[: len(got)] else None
            if follows is not None and more != follows:
                out.append(
                    f"{where}: page {k + 1} (after {len(got)} of {len(ref)}) says "
                    f"has_next_page={more}"
                )
        if got != ref:
            out.append(f"{where}: read {got}, want the unpaged list {ref}")
    return out


# -- agent files -----------------------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text"
    )


def _rule(rule: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        rule.get("type"),
        rule.get("tool_name"),
        tuple(rule.get("children") or ()),
        rule.get("max_count_limit"),
    )


def normal_agent_file(document: Mapping[str, Any]) -> dict[str, Any]:
    """An agent file's first agent as what it *is*, file-local ids resolved: its settings,
    blocks, tools, rules, folders, files, open windows and history (role and text; the system
    message left out, as the server writes its own)."""
    [agent] = document["agents"][:1]
    blocks = {b["id"]: b for b in document.get("blocks") or ()}
    tools = {t["id"]: t for t in document.get("tools") or ()}
    sources = {s["id"]: s for s in document.get("sources") or ()}
    files = {f["id"]: f for f in document.get("files") or ()}
    return {
        "settings": {
            key: agent.get(key)
            for key in (
                "agent_type",
                "description",
                "tags",
                "metadata",
                "timezone",
                "model",
                "context_window_limit",
                "max_tokens",
                "max_files_open",
                "per_file_view_window_char_limit",
            )
        },
        "rules": sorted(_rule(r) for r in agent.get("tool_rules") or ()),
        "blocks": [
            {
                key: blocks[ref].get(key)
                for key in ("label", "value", "limit", "description", "read_only", "metadata")
            }
            for ref in agent.get("block_ids") or ()
        ],
        "tools": {
            tools[ref]["name"]: {
                key: tools[ref].get(key)
                for key in (
                    "tool_type",
                    "description",
                    "tags",
                    "source_code",
                    "json_schema",
                    "return_char_limit",
                    "default_requires_approval",
                    "metadata_",
                )
            }
            for ref in agent.get("tool_ids") or ()
        },
        "folders": [
            {
                key: sources[ref].get(key)
                for key in ("name", "description", "instructions", "metadata")
            }
            for ref in agent.get("source_ids") or ()
        ],
        "files": sorted(
            (f["file_name"], f.get("content") or "")
            for f in files.values()
            if f.get("source_id") in (agent.get("source_ids") or ())
        ),
        "open": sorted(
            (
                files[fa["file_id"]]["file_name"],
                fa.get("start_line"),
                fa.get("end_line"),
            )
            for fa in agent.get("files_agents") or ()
            if fa.get("is_open") and fa.get("file_id") in files
        ),
        "history": [
            (m.get("role"), _text_of(m.get("content")))
            for m in agent.get("messages") or ()
            if m.get("role") != "system"
        ],
    }


def align_export(got: dict[str, Any], want: dict[str, Any], exported: Mapping[str, Any]) -> None:
    """Make a copy's export comparable with the document it came from, in place: a folder
    named ``docs`` may come back as ``docs_(1)`` (Letta's suffix), and files not processed
    within the walk's wait have no text yet."""
    for folder in got["folders"]:
        wanted = [f["name"] for f in want["folders"]]
        match = [n for n in wanted if folder["name"] == n or folder["name"].startswith(n)]
        folder["name"] = match[0] if match else folder["name"]
    statuses = {f.get("processing_status") for f in exported.get("files") or ()}
    if statuses - {"completed"}:
        want["files"] = [(name, None) for name, _ in want["files"]]
        got["files"] = [(name, None) for name, _ in got["files"]]


def _check_round_trips(log: CatalogLog) -> list[str]:
    out: list[str] = []
    for what, written, exported, name in log.round_trips:
        try:
            want, got = normal_agent_file(written), normal_agent_file(exported)
        except (KeyError, TypeError, ValueError) as error:
            out.append(f"{what}: the export is not an agent file of one agent: {error!r}")
            continue
        got_name = exported["agents"][0].get("name")
        if got_name != name:
            out.append(f"{what}: the agent is named {got_name!r}, want {name!r}")
        extra = sorted(
            n
            for n, t in got["tools"].items()
            if n not in want["tools"] and t.get("tool_type") != FILE_TOOL_TYPE
        )
        if extra:
            out.append(f"{what}: tools {extra} that the file does not have")
        got["tools"] = {n: t for n, t in got["tools"].items() if n in want["tools"]}
        align_export(got, want, exported)
        for part in want:
            if what in log.unsure and part in AFTER_CREATE:
                continue
            if got[part] != want[part]:
                out.append(f"{what}: {part} {got[part]!r}, the file has {want[part]!r}")
    return out


# -- search ----------------------------------------------------------------------------------
def fts_share(query: str, text: str) -> float:
    """The share of the query's words that ``text`` has (the workload's queries and texts are
    plain lowercase ASCII words with no stop word in the query)."""
    asked = set(_WORD.findall(query.lower()))
    have = set(_WORD.findall(text.lower()))
    return len(asked & have) / max(1, len(asked))


def _check_searches(log: CatalogLog) -> list[str]:
    out: list[str] = []
    for seen in log.searches:
        where = f"messages.search(query={seen.query!r}, fts, limit={seen.limit})"
        written = dict(seen.written)
        shares = [(fts_share(seen.query, text), mid) for mid, text in seen.hits]
        if len(seen.hits) > seen.limit:
            out.append(f"{where}: {len(seen.hits)} hits")
        if any(share == 0 for share, _ in shares):
            out.append(f"{where}: a hit has none of the query's words: {list(seen.hits)}")
        ranked = sorted(shares, key=lambda p: (-p[0], p[1]))
        if shares != ranked:
            out.append(f"{where}: hits in the order {shares}, want share first, then id")
        hit_ids = {mid for mid, _ in seen.hits}
        left = [(fts_share(seen.query, t), m) for m, t in written.items() if m not in hit_ids]
        best_left = max((s for s, _ in left), default=0.0)
        worst_hit = min((s for s, _ in shares), default=1.0)
        if best_left > 0 and (len(seen.hits) < seen.limit or best_left > worst_hit):
            missed = sorted(m for s, m in left if s > 0)
            out.append(f"{where}: leaves out {missed}, which have the query's words")
    return out


def check_catalog(log: CatalogLog) -> list[str]:
    """Every property of the module docstring, against ``log``."""
    return [
        *log.problems,
        *_check_block_limits(log),
        *_check_patches(log),
        *_check_walks(log),
        *_check_members(log),
        *_check_schedules(log),
        *_check_round_trips(log),
        *_check_searches(log),
    ]
