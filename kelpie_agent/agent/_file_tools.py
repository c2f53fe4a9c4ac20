"""The file tools, as Letta's: ``open_files``, ``grep_files``, ``semantic_search_files``.

They work on the files of the agent's attached folders (``_agent_files``). ``open_files``
changes which files are open (its writes commit with its result, so the change happens exactly
when the result is stored); the two searches only read, and mark the files they matched as
recently used (Letta's LRU), also with the result.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import attrs

from kelpie_agent.embeddings import Passage, VectorIndex

from ._agent_files import AgentFile, load_agent_files, open_writes, state_key, with_text
from ._codec import pack
from ._documents import document_lines, window
from ._folders import FilePassage, file_passages
from ._memory_edits import ToolError
from ._outcome import ToolOutcome
from ._runtime import AgentRuntime

__all__ = ["run_file_tool"]

GREP_PAGE = 20
MAX_COLLECTED = 1000
MAX_PATTERN = 1000
MAX_SEARCH_RESULTS = 50


async def run_file_tool(rt: AgentRuntime, name: str, args: dict[str, Any]) -> ToolOutcome:
    if name == "open_files":
        return await _open_files(
            rt, args.get("file_requests") or [], bool(args.get("close_all_others"))
        )
    if name == "grep_files":
        return await _grep(
            rt,
            args["pattern"],
            args.get("include"),
            args.get("context_lines"),
            args.get("offset"),
        )
    return await _semantic(rt, args["query"], args.get("limit") or 5)


def _touch(rt: AgentRuntime, files: list[AgentFile]) -> tuple[tuple[bytes, bytes], ...]:
    now = rt.now()
    agent = rt.require()
    return tuple(
        (state_key(agent.id, f.record.id), pack(attrs.evolve(f.state, last_accessed_at=now)))
        for f in files
    )


async def _open_files(
    rt: AgentRuntime, requests: list[dict[str, Any]], close_all_others: bool
) -> ToolOutcome:
    agent = rt.require()
    if not requests:
        raise ToolError("No file requests provided")
    if len(requests) > agent.max_files_open:
        raise ToolError(
            f"Cannot open {len(requests)} files: exceeds configured maximum limit of "
            f"{agent.max_files_open} files"
        )
    files = await load_agent_files(rt)
    by_name = {f.name: f for f in files}
    wanted = [str(r.get("file_name", "")) for r in requests]
    writes: dict[bytes, bytes] = {}
    closed_others: list[str] = []
    if close_all_others:
        for f in files:
            if f.state.is_open and f.name not in wanted:
                closed_others.append(f.name)
                writes[state_key(agent.id, f.record.id)] = pack(
                    attrs.evolve(f.state, is_open=False)
                )
        files = [
            attrs.evolve(f, state=attrs.evolve(f.state, is_open=False))
            if f.name in closed_others
            else f
            for f in files
        ]
    evicted: list[str] = []
    summaries: list[str] = []
    for request in requests:
        name = str(request.get("file_name", ""))
        target = next((f for f in files if f.name == name), None)
        if target is None:
            raise ToolError(
                f"{name} not attached - did you get the filename correct? Currently you have "
                f"the following files attached: {sorted(by_name)}"
            )
        if target.record.processing_status != "completed":
            raise ToolError(f"{name} is still being processed ({target.record.processing_status})")
        offset, length = request.get("offset"), request.get("length")
        if offset is not None and offset < 0:
            raise ToolError(f"Offset for file {name} must be >= 0 (0-indexed), got {offset}")
        if length is not None and length < 1:
            raise ToolError(f"Length for file {name} must be >= 1, got {length}")
        start = offset
        end = offset + length if offset is not None and length is not None else None
        target = await with_text(rt, target)
        window(name, target.text or "", start, end)  # checks the range
        previous = target.state
        state_writes, closed, states = open_writes(rt, files, target, start, end)
        writes.update(state_writes)
        changed = {s.file_id: s for s in states}
        files = [attrs.evolve(f, state=changed.get(f.record.id, f.state)) for f in files]
        evicted += [c for c in closed if c not in wanted]
        summaries.append(name + _range(offset, length) + _previous(previous))
    if len(summaries) == 1:
        text = f"* Opened {summaries[0]}"
    else:
        text = f"* Opened {len(summaries)} files: {', '.join(summaries)}"
    if closed_others:
        text += (
            f"\nNote: Closed {len(closed_others)} file(s) due to close_all_others=True: "
            f"{', '.join(closed_others)}"
        )
    if evicted:
        text += (
            f"\nNote: Closed {len(evicted)} least recently used file(s) due to open file limit: "
            f"{', '.join(evicted)}"
        )
    return ToolOutcome(True, text, writes=tuple(writes.items()))


async def _passages(rt: AgentRuntime, file_id: str) -> list[FilePassage]:
    found: list[FilePassage] = await rt.read(
        lambda: file_passages(rt.ctx.kv, file_id), "file passages"
    )
    return found


def _range(offset: int | None, length: int | None) -> str:
    if offset is not None and length is not None:
        return f" (lines {offset + 1}-{offset + length})"
    if offset is not None:
        return f" (lines {offset + 1}-end)"
    return ""


def _previous(state: Any) -> str:
    if not state.is_open:
        return ""
    if state.start_line is not None and state.end_line is not None:
        return f" (previously lines {state.start_line + 1}-{state.end_line})"
    if state.start_line is not None:
        return f" (previously lines {state.start_line + 1}-end)"
    return " (previously full file)"


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    if len(pattern) > MAX_PATTERN:
        raise ToolError(f"Pattern too complex: {len(pattern)} chars > {MAX_PATTERN} limit")
    try:
        return re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    except re.error as error:
        raise ToolError(f"Invalid regex pattern ({what}): {error}") from None


async def _grep(
    rt: AgentRuntime,
    pattern: str,
    include: str | None,
    context_lines: int | None,
    offset: int | None,
) -> ToolOutcome:
    if not pattern or not pattern.strip():
        raise ToolError("Empty search pattern provided")
    pattern = pattern.strip()
    regex = _compile(pattern, "pattern")
    files = [f for f in await load_agent_files(rt) if f.record.processing_status == "completed"]
    if not files:
        return ToolOutcome(True, "No files are currently attached to search")
    if include and include.strip():
        glob = include.strip()
        if "*" in glob and not any(c in glob for c in "^$()[]{}\\+"):
            glob = glob.replace(".", r"\.").replace("*", ".*").replace("?", ".") + "$"
        name_regex = _compile(glob, "include")
        before = len(files)
        files = [f for f in files if name_regex.search(f.name)]
        if not files:
            return ToolOutcome(
                True, f"No files match the filename pattern '{include}' (filtered {before} files)"
            )
    context = max(0, context_lines if context_lines is not None else 1)
    matches: list[tuple[str, int, list[str]]] = []
    matched: list[AgentFile] = []
    for f in files:
        f = await with_text(rt, f)
        lines = document_lines(f.name, f.text or "")
        hit = False
        for i, line in enumerate(lines):
            if len(matches) >= MAX_COLLECTED:
                break
            if regex.search(line):
                hit = True
                low, high = max(0, i - context), min(len(lines), i + context + 1)
                shown = [f"{'>' if j == i else ' '} {j + 1}: {lines[j]}" for j in range(low, high)]
                matches.append((f.name, i + 1, shown))
        if hit:
            matched.append(f)
    if not matches:
        return ToolOutcome(True, f"No matches found for pattern: '{pattern}'")
    start = max(0, offset or 0)
    end = start + GREP_PAGE
    page = matches[start:end]
    total = len(matches)
    capped = total >= MAX_COLLECTED
    count = f"{MAX_COLLECTED}+" if capped else str(total)
    out = [
        f"Found {count} total matches across {len(matched)} files (showing matches "
        f"{start + 1}-{min(end, total)} of {count})",
        "=" * 80,
        "\nFiles with matches:",
    ]
    counts: dict[str, int] = {}
    for name, _, _ in matches:
        counts[name] = counts.get(name, 0) + 1
    for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        out.append(f"  - {name}: {n} matches")
    out.append("")
    for name, number, shown in page:
        out.append(f"\n=== {name}:{number} ===\n" + "\n".join(shown))
    out.append("")
    if end < total:
        out.append(f'To see more matches, call: grep_files(pattern="{pattern}", offset={end})')
    else:
        out.append("No more matches to show.")
    return ToolOutcome(True, "\n".join(out), writes=_touch(rt, matched))


async def _semantic(rt: AgentRuntime, query: str, limit: int) -> ToolOutcome:
    if not query or not query.strip():
        raise ToolError("Empty search query provided")
    limit = max(1, min(int(limit), MAX_SEARCH_RESULTS))
    files = [f for f in await load_agent_files(rt) if f.record.processing_status == "completed"]
    if not files:
        return ToolOutcome(True, "No files are currently attached to search")
    embedder = rt.env.embedder
    index = VectorIndex(embedder.dimensions)
    owners: dict[str, AgentFile] = {}
    texts: dict[str, str] = {}
    stale: list[FilePassage] = []
    for f in files:
        passages = await _passages(rt, f.record.id)
        for p in passages:
            owners[p.id], texts[p.id] = f, p.text
            if len(p.vector) == 8 * embedder.dimensions:
                vector = struct.unpack(f"<{len(p.vector) // 8}d", p.vector)
                index.add(Passage(p.id, p.text, vector, (), 0.0))
            else:
                stale.append(p)
    if stale:
        vectors = await embedder.embed([p.text for p in stale])
        for p, vector in zip(stale, vectors, strict=True):
            index.add(Passage(p.id, p.text, vector, (), 0.0))
    [query_vector] = await embedder.embed([query.strip()])
    hits = index.search(query_vector, top_k=limit)
    if not hits:
        return ToolOutcome(True, f"No semantic matches found for query: '{query}'")
    grouped: dict[str, list[tuple[str, float]]] = {}
    for hit in hits:
        grouped.setdefault(owners[hit.passage.id].name, []).append(
            (texts[hit.passage.id], hit.score)
        )
    summary = (
        f"Found {len(hits)} matches in {len(grouped)} file{'s' if len(grouped) != 1 else ''} "
        f"for query: '{query}'"
    )
    out = [summary, "=" * len(summary)]
    number = 0
    for name, found in grouped.items():
        for text, score in found:
            number += 1
            lines = text.strip().splitlines()
            shown = [f"  {line}" for line in lines[:20]]
            if len(lines) > 20:
                shown.append(f"  ... [truncated {len(lines) - 20} more lines]")
            out.append(
                f"\n=== {name} (passage #{number}) (score: {score:.3f}) ===\n" + "\n".join(shown)
            )
    touched = list({owners[h.passage.id].record.id: owners[h.passage.id] for h in hits}.values())
    return ToolOutcome(True, "\n".join(out), writes=_touch(rt, touched))
