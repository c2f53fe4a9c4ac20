"""A reference model of an agent's files and Letta's file tools, for ``agent_file_tools``.

Written from Letta's file tools as docs/letta-compat.md and docs/agent.md describe them, not
from kelpie_agent's code: which files of the attached folders are open and with which window,
the least-recently-used order that closes a file when ``max_files_open`` are open, what
``open_files`` and ``grep_files`` answer (texts, pages, notes, refusals), and the
``<directories>`` section of the system prompt that shows the open files to the model. The
workload replays every operation on the model and compares, so a window off by one line, a
wrong file evicted, a grep page that skips a match or a prompt that shows a closed file is a
difference with the first operation that made it.

Time is logical: every moment a real tool reads the clock is one tick here. Files touched at
one moment (a folder's files opened when it is attached, the files one grep matched) share a
tick and are ordered by id, as the real tools break ties.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

__all__ = ["MFile", "Model", "Outcome", "directories_section", "lines_of"]

GREP_PAGE = 20
MAX_COLLECTED = 1000


def lines_of(name: str, text: str) -> list[str]:
    """The lines a file is shown and searched by (Letta's LineChunker): source code keeps its
    indentation, other text is stripped; empty lines are dropped."""
    if name.endswith(".py"):
        return [line.rstrip() for line in text.splitlines() if line.strip()]
    return [line.strip() for line in text.splitlines() if line.strip()]


@attrs.define
class MFile:
    id: str
    folder: str  # folder name
    file_name: str
    created: float
    text: str
    open: bool = False
    start: int | None = None  # 0-based first line shown
    end: int | None = None  # 0-based, exclusive
    last: tuple[int, str] = (0, "")  # (tick, id): the LRU order
    passages: int = 0  # how many passages the file was cut into (semantic search's pool)

    @property
    def name(self) -> str:
        return f"{self.folder}/{self.file_name}"

    @property
    def lines(self) -> list[str]:
        return lines_of(self.file_name, self.text)


@attrs.frozen
class Outcome:
    """What a tool call must answer: its text, and whether it is an error."""

    text: str
    error: bool = False


def _failure(tool: str, kind: str, message: str) -> Outcome:
    return Outcome(f"Error executing function {tool}: {kind}: {message}", True)


def _window(f: MFile) -> str:
    lines = f.lines
    total = len(lines)
    first = max(0, f.start or 0)
    last = min(f.end, total) if f.end is not None else total
    shown = [f"{i + 1}: {lines[i]}" for i in range(first, last)]
    if f.start is not None and f.end is not None:
        header = f"[Viewing lines {first + 1} to {last} (out of {total} lines)]"
    elif f.start is not None:
        header = f"[Viewing lines {first + 1} to end (out of {total} lines)]"
    else:
        header = f"[Viewing file start (out of {total} lines)]"
    return "\n".join([header, *shown])


def directories_section(system: str) -> str | None:
    """The ``<directories>`` section of a system prompt (None: there is none)."""
    start = system.find("<directories>")
    if start < 0:
        return None
    end = system.find("</directories>", start)
    return system[start : end + len("</directories>")] if end >= 0 else system[start:]


@attrs.define
class Model:
    max_open: int
    char_limit: int
    folders: list[tuple[str, str]]  # (name, description), in attachment order
    files: list[MFile] = attrs.Factory(list)  # directory order
    tick: int = 0

    # -- set-up ---------------------------------------------------------------------------
    def add_file(self, f: MFile) -> None:
        self.files.append(f)
        order = [name for name, _ in self.folders]
        self.files.sort(key=lambda g: (order.index(g.folder), g.created, g.id))

    def attach(self, folder: str) -> None:
        """A folder attached: its files opened at one moment, in directory order."""
        self.tick += 1
        for f in self.files:
            if f.folder == folder:
                self._open(self.files, f, None, None, self.tick)

    # -- what the model is shown ----------------------------------------------------------
    def directories(self) -> str:
        parts = [
            "<directories>",
            "<file_limits>",
            f"- current_files_open={sum(1 for f in self.files if f.open)}",
            f"- max_files_open={self.max_open}",
            "</file_limits>",
        ]
        for folder, description in self.folders:
            parts.append(f'<directory name="{folder}">')
            if description:
                parts.append(f"<description>{description}</description>")
            for f in self.files:
                if f.folder != folder:
                    continue
                value = _window(f)[: self.char_limit] if f.open and f.text else ""
                parts += [
                    f'<file status="{"open" if value else "closed"}" name="{f.name}">',
                    "<metadata>",
                    "- read_only=true",
                    f"- chars_current={len(value)}",
                    f"- chars_limit={self.char_limit}",
                    "</metadata>",
                ]
                if value:
                    parts += ["<value>", value, "</value>"]
                parts.append("</file>")
            parts.append("</directory>")
        parts.append("</directories>")
        return "\n".join(parts)

    # -- open_files -----------------------------------------------------------------------
    def _open(
        self, files: list[MFile], target: MFile, start: int | None, end: int | None, tick: int
    ) -> list[str]:
        """Open ``target`` in ``files`` (copies) -> the names closed to make room."""
        target.open, target.start, target.end, target.last = True, start, end, (tick, target.id)
        others = sorted((f for f in files if f.open and f is not target), key=lambda f: f.last)
        closed = []
        while others and len(others) + 1 > self.max_open:
            victim = others.pop(0)
            victim.open = False
            closed.append(victim.name)
        return closed

    def open_files(self, requests: Sequence[Mapping[str, Any]], close_others: bool) -> Outcome:
        tool = "open_files"
        if not requests:
            return _failure(tool, "ValueError", "No file requests provided")
        if len(requests) > self.max_open:
            return _failure(
                tool,
                "ValueError",
                f"Cannot open {len(requests)} files: exceeds configured maximum limit of "
                f"{self.max_open} files",
            )
        files = [attrs.evolve(f) for f in self.files]  # applied only if the call succeeds
        by_name = {f.name: f for f in files}
        wanted = [str(r.get("file_name", "")) for r in requests]
        closed_others = []
        if close_others:
            for f in files:
                if f.open and f.name not in wanted:
                    f.open = False
                    closed_others.append(f.name)
        evicted: list[str] = []
        summaries = []
        tick = self.tick
        for request in requests:
            name = str(request.get("file_name", ""))
            target = by_name.get(name)
            if target is None:
                return _failure(
                    tool,
                    "ValueError",
                    f"{name} not attached - did you get the filename correct? Currently you "
                    f"have the following files attached: {sorted(by_name)}",
                )
            offset, length = request.get("offset"), request.get("length")
            if offset is not None and offset < 0:
                return _failure(
                    tool,
                    "ValueError",
                    f"Offset for file {name} must be >= 0 (0-indexed), got {offset}",
                )
            if length is not None and length < 1:
                return _failure(
                    tool, "ValueError", f"Length for file {name} must be >= 1, got {length}"
                )
            end = offset + length if offset is not None and length is not None else None
            total = len(target.lines)
            if offset is not None and offset >= total:
                return _failure(
                    tool,
                    "InvalidRequestError",
                    f"File {name} has only {total} lines, but requested offset {offset + 1} "
                    "is out of range",
                )
            previous = _previous(target)
            tick += 1  # each file is opened at its own moment (its text is read first)
            evicted += [n for n in self._open(files, target, offset, end, tick) if n not in wanted]
            summaries.append(name + _range(offset, length) + previous)
        self.files, self.tick = files, tick
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
                f"\nNote: Closed {len(evicted)} least recently used file(s) due to open file "
                f"limit: {', '.join(evicted)}"
            )
        return Outcome(text)

    # -- grep_files -----------------------------------------------------------------------
    def grep(
        self, pattern: str, include: str | None, context_lines: int | None, offset: int | None
    ) -> Outcome:
        tool = "grep_files"
        if not pattern or not pattern.strip():
            return _failure(tool, "ValueError", "Empty search pattern provided")
        pattern = pattern.strip()
        try:
            regex = re.compile(pattern, re.IGNORECASE | re.MULTILINE)
        except re.error as error:
            return _failure(tool, "ValueError", f"Invalid regex pattern (pattern): {error}")
        files = list(self.files)
        if not files:
            return Outcome("No files are currently attached to search")
        if include and include.strip():
            glob = include.strip()
            if "*" in glob and not any(c in glob for c in "^$()[]{}\\+"):
                glob = glob.replace(".", r"\.").replace("*", ".*").replace("?", ".") + "$"
            names = re.compile(glob, re.IGNORECASE | re.MULTILINE)
            before = len(files)
            files = [f for f in files if names.search(f.name)]
            if not files:
                return Outcome(
                    f"No files match the filename pattern '{include}' (filtered {before} files)"
                )
        context = max(0, context_lines if context_lines is not None else 1)
        matches: list[tuple[str, int, list[str]]] = []
        matched: list[MFile] = []
        for f in files:
            lines = f.lines
            hit = False
            for i, line in enumerate(lines):
                if len(matches) >= MAX_COLLECTED:
                    break
                if regex.search(line):
                    hit = True
                    low, high = max(0, i - context), min(len(lines), i + context + 1)
                    shown = [
                        f"{'>' if j == i else ' '} {j + 1}: {lines[j]}" for j in range(low, high)
                    ]
                    matches.append((f.name, i + 1, shown))
            if hit:
                matched.append(f)
        if not matches:
            return Outcome(f"No matches found for pattern: '{pattern}'")
        start = max(0, offset or 0)
        end = start + GREP_PAGE
        total = len(matches)
        count = f"{MAX_COLLECTED}+" if total >= MAX_COLLECTED else str(total)
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
        for name, number, shown in matches[start:end]:
            out.append(f"\n=== {name}:{number} ===\n" + "\n".join(shown))
        out.append("")
        if end < total:
            out.append(f'To see more matches, call: grep_files(pattern="{pattern}", offset={end})')
        else:
            out.append("No more matches to show.")
        self.tick += 1  # the files it matched were used now (one moment for all)
        for f in matched:
            f.last = (self.tick, f.id)
        return Outcome("\n".join(out))

    # -- semantic_search_files ------------------------------------------------------------
    def semantic(self, query: str, limit: int | None, answer: str, error: bool) -> list[str]:
        """Judge a semantic search's answer by what any ranking must satisfy (the scores are
        the embedder's, which the model does not recompute): the count is the limit (at most
        50, 5 when not given) or every passage there is, entries are numbered in order and
        grouped by file, each shows lines of the file it names, scores fall within a file and
        the first entry is the best; then the files it named were used now."""
        if not query.strip():
            want = _failure("semantic_search_files", "ValueError", "Empty search query provided")
            return [] if (answer, error) == (want.text, True) else [f"answered {answer!r}"]
        if error:
            return [f"refused: {answer}"]
        head = re.compile(r"\n=== (.+?) \(passage #(\d+)\) \(score: (-?[0-9.]+)\) ===\n")
        parts = head.split(answer)
        entries = [
            (parts[i], int(parts[i + 1]), float(parts[i + 2]), parts[i + 3])
            for i in range(1, len(parts) - 3, 4)
        ]
        wanted = min(max(1, min(limit or 5, 50)), sum(f.passages for f in self.files))
        names = list(dict.fromkeys(name for name, _, _, _ in entries))
        summary = (
            f"Found {len(entries)} matches in {len(names)} file{'s' if len(names) != 1 else ''} "
            f"for query: '{query}'"
        )
        problems = []
        if not answer.startswith(summary + "\n" + "=" * len(summary)):
            problems.append(f"its summary is not {summary!r}: {answer[:120]!r}")
        if len(entries) != wanted:
            problems.append(f"{len(entries)} entries, not {wanted} (limit {limit})")
        if [k for _, k, _, _ in entries] != list(range(1, len(entries) + 1)):
            problems.append("its passages are not numbered 1, 2, ... in order")
        by_name = {f.name: f for f in self.files}
        groups = [
            name for i, (name, _, _, _) in enumerate(entries) if i == 0 or entries[i - 1][0] != name
        ]
        if len(groups) != len(names):
            problems.append(f"a file's passages are not together: {groups}")
        for i, (name, k, score, body) in enumerate(entries):
            f = by_name.get(name)
            if f is None:
                problems.append(f"passage #{k} names {name!r}, not an attached file")
                continue
            words = " ".join(f.text.split())  # a passage may join lines: compare words
            shown = [" ".join(line.split()) for line in body.split("\n") if line.strip()]
            strange = [line for line in shown if not line.startswith("...") and line not in words]
            if strange:
                problems.append(f"passage #{k} of {name} shows {strange[0]!r}, not in the file")
            if i and entries[i - 1][0] == name and entries[i - 1][2] < score:
                problems.append(f"passage #{k} of {name} scores above the one before it")
        if entries and max(e[2] for e in entries) > entries[0][2]:
            problems.append("the first passage is not the best match")
        self.tick += 1
        for name in names:
            if name in by_name:
                by_name[name].last = (self.tick, by_name[name].id)
        return problems


def _range(offset: int | None, length: int | None) -> str:
    if offset is not None and length is not None:
        return f" (lines {offset + 1}-{offset + length})"
    if offset is not None:
        return f" (lines {offset + 1}-end)"
    return ""


def _previous(f: MFile) -> str:
    if not f.open:
        return ""
    if f.start is not None and f.end is not None:
        return f" (previously lines {f.start + 1}-{f.end})"
    if f.start is not None:
        return f" (previously lines {f.start + 1}-end)"
    return " (previously full file)"
