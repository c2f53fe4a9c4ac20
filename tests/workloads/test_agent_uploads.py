"""The agent_uploads scenario: uploads, deletes and file searches under crashes. It passes, is
deterministic, and its oracle names each kind of broken upload."""

from __future__ import annotations

import json

from kelpie_agent.agent._codec import pack
from kelpie_agent.agent._folders import FilePassage, FileRecord, Folder
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims._storage import SimKVStore
from kelpie_dst.workloads._agent_upload_checks import UploadLog, check, named_files

SMALL = ["workload.params.uploads=6"]


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_uploads", SMALL)
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["uploads.acked"] >= 1
    assert first.metrics["uploads.searches"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


TEXT = "alpha beta gamma.\n\ndelta KTOK0000Z epsilon\n"


def _rows() -> dict[bytes, bytes]:
    record = FileRecord(
        "file-1", "source-1", "doc-000.md", "doc-000.md", "text/markdown", len(TEXT),
        processing_status="completed", total_chunks=2, chunks_embedded=2, text_chunks=1,
    )  # fmt: skip
    rows = {
        b"folder/source-1": pack(Folder("source-1", "library", chunk_size=60)),
        b"folderfile/source-1/file-1": pack(record),
        b"fileid/file-1": pack("source-1"),
        b"filetext/file-1/00000000": TEXT.encode(),
    }
    for n, text in enumerate(["alpha beta gamma.", "delta KTOK0000Z epsilon"]):
        passage = FilePassage(f"p{n}", "file-1", "source-1", n, text, b"", "hash")
        rows[f"fchunk/file-1/{n:08x}".encode()] = pack(passage)
    return rows


def _log(rows: dict[bytes, bytes]) -> UploadLog:
    log = UploadLog(store=SimKVStore)
    log.sent[0] = ("doc-000.md", TEXT.encode())
    log.acked[0] = "file-1"
    log.snapshot = rows
    return log


def test_a_whole_file_passes_and_a_missing_passage_is_named() -> None:
    assert check(_log(_rows())) == []
    half = _rows()
    half.pop(b"fchunk/file-1/00000001")
    assert check(_log(half)) == [
        "file file-1 is completed but it has passages [0] of total_chunks=2"
    ]


def test_lost_uploads_leftovers_and_stuck_files_are_named() -> None:
    log = _log({})
    log.stuck = ["file-2 (embedding)"]
    log.snapshot = {b"fchunk/file-9/00000000": b"x"}
    assert check(log) == [
        "file file-2 (embedding) still unfinished after the grace period",
        "upload 0 (file-1) was acknowledged, then lost",
        "fchunk/file-9/00000000 is left of a deleted file",
    ]


def test_search_results_name_their_files() -> None:
    message = "Found 1\n\nFiles with matches:\n  - library/doc-001.md: 2 matches\n"
    grep = json.dumps({"status": "OK", "message": message})
    semantic = "=== library/doc-002.txt (passage #1) (score: 0.5) ===\n  text"
    assert named_files(grep) == ["doc-001.md"]
    assert named_files(semantic) == ["doc-002.txt"]
