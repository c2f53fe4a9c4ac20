"""The uploads workload's documents, its log, and its oracle (kept apart from the workload).

The oracle reads the database host's store directly (no node, no faults) and judges by
properties, not by re-running the server's code: a completed file's passages are numbered
``0..total_chunks-1`` with none missing or extra, each is non-empty and at most the folder's
chunk size, and together they hold exactly the uploaded text's characters (whitespace aside),
in order; a file in ``error`` has a reason and an upload that truly is not text; nothing of a
deleted file is left; every stored file is finished once the grace period is over; and the
agent's file tools name completed files only, and find every completed file's token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kelpie_agent.agent._codec import unpack

from ..shims._storage import SimKVStore

__all__ = [
    "FOLDER",
    "UploadLog",
    "check",
    "check_search",
    "document",
    "passages_complete",
    "snapshot",
]

FOLDER = "library"
_WORDS = (
    "kelp", "otter", "tide", "reef", "current", "harbor", "anchor", "buoy", "storm", "shell",
    "café", "naïve", "façade", "smørrebrød", "Ελλάδα", "Москва", "東京", "海藻", "🌊", "ß",
)  # fmt: skip
_SIZES = ((20, 60), (150, 400), (600, 1500))  # words


def token(n: int) -> str:
    return f"KTOK{n:04d}Z"


def document(n: int, rng: Any) -> tuple[str, bytes]:
    """Upload ``n``: markdown or plain text, small to several kB, its token somewhere inside;
    about one in ten is not UTF-8 at all (it must end in ``error``, with a reason)."""
    low, high = _SIZES[rng.randrange(len(_SIZES))]
    words = [rng.choice(_WORDS) for _ in range(rng.randint(low, high))]
    words.insert(rng.randrange(len(words) + 1), token(n))
    markdown = rng.random() < 0.5
    lines: list[str] = [f"# Document {n}", ""] if markdown else []
    while words:
        k = rng.randint(3, 40)
        take, words = words[:k], words[k:]
        line = " ".join(take)
        if rng.random() < 0.3:
            line += "."
        if markdown and rng.random() < 0.2:
            line = "- " + line
        lines.append(line)
        if rng.random() < 0.25:
            lines.append("")
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.1:  # latin-1 bytes: not UTF-8
        return f"doc-{n:03d}.txt", text.encode("utf-8") + "é".encode("latin-1") + b"\n"
    return f"doc-{n:03d}.{'md' if markdown else 'txt'}", text.encode("utf-8")


@attrs.define
class UploadLog:
    """What the clients did and saw, and the oracle's findings along the way."""

    store: Callable[[], SimKVStore]
    folder_id: str = ""
    agent_id: str = ""
    sent: dict[int, tuple[str, bytes]] = attrs.Factory(dict)  # n -> (name, bytes)
    acked: dict[int, str] = attrs.Factory(dict)  # n -> file id
    deleted: set[str] = attrs.Factory(set)  # file ids whose delete was acknowledged
    delete_tried: set[str] = attrs.Factory(set)  # ... or only sent (it may have happened)
    finals: dict[int, str] = attrs.Factory(dict)  # n -> the final grep's tool results
    failures: list[str] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    stuck: list[str] = attrs.Factory(list)
    snapshot: dict[bytes, bytes] = attrs.Factory(dict)
    searches: int = 0

    def statuses(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in _records(self.snapshot).values():
            status = record["processing_status"]
            counts[status] = counts.get(status, 0) + 1
        return counts

    def token(self, n: int) -> str:
        return token(n)

    def unfinished(self) -> list[str]:
        """Stored files not completed nor failed (as ``id (status)``)."""
        return [
            f"{r['id']} ({r['processing_status']})"
            for r in _records(_rows(self.store())).values()
            if r["processing_status"] not in ("completed", "error")
        ]


def snapshot(store: SimKVStore) -> dict[bytes, bytes]:
    return _rows(store)


def _rows(store: SimKVStore | Mapping[bytes, bytes]) -> dict[bytes, bytes]:
    if isinstance(store, SimKVStore):
        rows = {}
        for key in list(store.keys()):
            value = store._get(key)
            if value is not None:
                rows[key] = value
        return rows
    return dict(store)


def _records(rows: Mapping[bytes, bytes]) -> dict[str, dict[str, Any]]:
    """file id -> its record's fields."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in rows.items():
        if key.startswith(b"folderfile/"):
            record = attrs.asdict(unpack(value))
            out[record["id"]] = record
    return out


def _chunk_size(rows: Mapping[bytes, bytes], folder_id: str) -> int:
    folder = rows.get(f"folder/{folder_id}".encode())
    return int(unpack(folder).chunk_size) if folder is not None else 0


def _passages(rows: Mapping[bytes, bytes], file_id: str) -> dict[int, str]:
    prefix = f"fchunk/{file_id}/".encode()
    return {
        int(key[len(prefix) :], 16): unpack(value).text
        for key, value in rows.items()
        if key.startswith(prefix)
    }


def passages_complete(store: SimKVStore | Mapping[bytes, bytes], file_id: str) -> str | None:
    """``None`` when the file's stored passages are exactly ``0..total_chunks-1`` and its
    text is stored; else what is wrong (the file must not be called completed then)."""
    rows = _rows(store)
    record = _records(rows).get(file_id)
    if record is None:
        return None  # deleted meanwhile
    numbers = sorted(_passages(rows, file_id))
    total = record["total_chunks"]
    if total is None or numbers != list(range(total)):
        shown = numbers if len(numbers) < 8 else [*numbers[:3], "...", *numbers[-3:]]
        return f"it has passages {shown} of total_chunks={total}"
    texts = [k for k in rows if k.startswith(f"filetext/{file_id}/".encode())]
    if len(texts) != record["text_chunks"] or not texts:
        return f"it has {len(texts)} text chunks of {record['text_chunks']}"
    return None


def _bare(text: str) -> str:
    return "".join(text.split())


def _check_file(rows: Mapping[bytes, bytes], record: dict[str, Any], data: bytes | None) -> str:
    fid, status = record["id"], record["processing_status"]
    if status == "error":
        if not record["error_message"]:
            return f"file {fid} is in error without a reason"
        if data is not None and _decodes(data):
            return f"file {fid} ({record['file_name']}) is text, yet ended in error"
        return ""
    if status != "completed":
        return f"file {fid} is still {status}"
    if data is not None and not _decodes(data):
        return f"file {fid} is not UTF-8, yet completed"
    incomplete = passages_complete(rows, fid)
    if incomplete:
        return f"file {fid} is completed but {incomplete}"
    if record["chunks_embedded"] != record["total_chunks"]:
        embedded, total = record["chunks_embedded"], record["total_chunks"]
        return f"file {fid} is completed with {embedded} of {total} passages embedded"
    passages = _passages(rows, fid)
    size = _chunk_size(rows, record["folder_id"])
    for n, text in sorted(passages.items()):
        if not text.strip() or (size and len(text) > size):
            return f"file {fid} passage {n} has {len(text)} characters (chunk size {size})"
    joined = _bare("".join(passages[n] for n in sorted(passages)))
    if data is not None and joined != _bare(data.decode("utf-8")):
        return f"file {fid}: its passages do not hold its text ({len(joined)} characters kept)"
    return ""


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_GREP = re.compile(r"^  - (.+): \d+ matches$", re.MULTILINE)
_SEMANTIC = re.compile(r"^=== (.+) \(passage #\d+\) \(score", re.MULTILINE)


def named_files(tool_return: str) -> list[str]:
    """The file names (without the folder) a file tool's result names."""
    try:
        message = str(json.loads(tool_return).get("message", ""))
    except (ValueError, AttributeError):
        message = tool_return
    names = _GREP.findall(message) + _SEMANTIC.findall(message)
    return [name.split("/", 1)[-1] for name in names]


def check_search(log: UploadLog, tool_return: str, op: Any, *, store: SimKVStore) -> None:
    """Right after a file tool answered: every file it named is completed at this instant."""
    by_name = {r["file_name"]: r for r in _records(_rows(store)).values()}
    for name in named_files(tool_return):
        record = by_name.get(name)
        if record is not None and record["processing_status"] != "completed":
            log.problems.append(
                f"{op.kind} {op.n}: the file tools showed {name} while it was "
                f"{record['processing_status']}"
            )


_HIT = re.compile(r"^=== (.+):(\d+) ===$")
_SHOWN = re.compile(r"^([> ]) (\d+): (.*)$")
GREP_CONTEXT = 1  # grep_files' default context_lines (the model never passes it)


def _grep_sections(message: str) -> list[tuple[str, int, list[tuple[bool, int, str]]]]:
    """Each match a grep_files result shows: (file, line, [(marked, number, text)])."""
    sections: list[tuple[str, int, list[tuple[bool, int, str]]]] = []
    for line in message.split("\n"):
        hit = _HIT.match(line)
        if hit is not None:
            sections.append((hit.group(1), int(hit.group(2)), []))
            continue
        shown = _SHOWN.match(line)
        if shown is not None and sections:
            sections[-1][2].append((shown.group(1) == ">", int(shown.group(2)), shown.group(3)))
    return sections


def check_grep_windows(log: UploadLog) -> list[str]:
    """Each match the final greps show of a plain-text file is the matching line with
    ``context_lines`` lines before and after it (fewer only at the file's ends), numbered
    from 1, as Letta's LineChunker cuts a text file: its non-blank lines, stripped."""
    problems: list[str] = []
    sent_by_name = {name: data for name, data in log.sent.values()}
    for n, found in sorted(log.finals.items()):
        for raw in found.split("\n"):
            try:
                message = str(json.loads(raw).get("message", ""))
            except (ValueError, AttributeError):
                continue
            for name, number, shown in _grep_sections(message):
                base = name.split("/", 1)[-1]
                data = sent_by_name.get(base)
                if data is None or not base.endswith(".txt"):
                    continue
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                lines = [line.strip() for line in text.splitlines() if line.strip()]
                low = max(1, number - GREP_CONTEXT)
                high = min(len(lines), number + GREP_CONTEXT)
                want = [(j == number, j, lines[j - 1]) for j in range(low, high + 1)]
                if shown != want:
                    got = [j for _, j, _ in shown]
                    problems.append(
                        f"final grep {n}: the match at {base}:{number} showed lines {got}, "
                        f"not {list(range(low, high + 1))} of its {len(lines)} (or other text)"
                    )
    return problems


def check(log: UploadLog) -> list[str]:
    """The oracle's findings on the final store (empty: all is well)."""
    problems = list(log.problems)
    problems += [f"file {s} still unfinished after the grace period" for s in log.stuck]
    rows = log.snapshot
    records = _records(rows)
    sent_by_name = {name: data for name, data in log.sent.values()}
    for fid, record in sorted(records.items()):
        problem = _check_file(rows, record, sent_by_name.get(record["original_file_name"]))
        if problem:
            problems.append(problem)
        if record["processing_status"] in ("completed", "error") and (
            f"filejob/{fid}".encode() in rows
        ):
            problems.append(f"file {fid} is {record['processing_status']} but its job is left")
    for n, fid in sorted(log.acked.items()):
        if fid not in records and fid not in log.delete_tried:
            problems.append(f"upload {n} ({fid}) was acknowledged, then lost")
    for fid in sorted(log.deleted):
        if fid in records:
            problems.append(f"file {fid} was deleted, yet its record is back")
    for key in sorted(rows):
        parts = key.split(b"/")
        if parts[0] in (b"fchunk", b"fileraw", b"filetext", b"filejob", b"fileid"):
            fid = parts[1].decode()
            if fid not in records:
                problems.append(f"{key.decode()} is left of a deleted file")
                break
    problems += check_grep_windows(log)
    for n, found in sorted(log.finals.items()):
        fid = log.acked[n]
        final = records.get(fid)
        names = named_files(found) if found else []
        if final is None:
            continue
        if final["processing_status"] == "completed" and final["file_name"] not in names:
            problems.append(f"grep_files did not find {token(n)} in completed file {fid}")
        if final["processing_status"] != "completed" and final["file_name"] in names:
            problems.append(f"grep_files found {token(n)} in {fid}, which is not completed")
    return problems
