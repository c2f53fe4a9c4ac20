"""The contract walker's upload probes (``contract_uploads``): a file is stored whole (apiV,
session 25).

Every other scenario's upload through ``/v1/folders/{id}/upload`` is a few lines long, and
nothing compared what a folder stored with what its client sent, so an upload cut short (the
first chunk of the body read, a body cut at a buffer's size, the last partial chunk of the
stored blobs dropped) was taken as the whole file. Here the contract client makes a folder
and uploads four plain-text files whose sizes are drawn across 8, 64, 128 and 256 KiB (sizes
a reader, a parser or a store is likely to cut at; 256 KiB is one stored chunk), each line
naming its file and line. Once processed, each file is read back
(``include_content=true``) and logged as an :class:`UploadSeen`: its ``file_size`` must be
the bytes sent, and a processed file's content the text sent (``uploads_read_back_whole``).
A retry of an upload whose answer was lost is ``duplicate_handling=skip`` under the same
name, so it answers the file the first attempt stored (never a second file).
"""

from __future__ import annotations

from typing import Any

import trio

from ._agent_contract_checks import UploadSeen

__all__ = ["FOLDER", "SIZES", "probe_uploads", "upload_text"]

FOLDER = "contract-uploads"
SIZES: tuple[tuple[int, int], ...] = (
    (8_000, 9_000),
    (60_000, 70_000),
    (126_000, 136_000),
    (262_500, 280_000),
)
"""Each upload's size in bytes, drawn in one of these ranges (around 8, 64 and 128 KiB, and
past 256 KiB, the size of one stored chunk)."""
POLLS = 60
DONE = frozenset({"completed", "error"})


def upload_text(k: int, size: int) -> str:
    """``size`` ASCII characters of numbered lines (the last one cut where the size ends)."""
    lines: list[str] = []
    length = 0
    n = 0
    while length < size:
        line = f"upload {k} line {n:05d}: kelp and tide, reef and foam\n"
        lines.append(line)
        length += len(line)
        n += 1
    return "".join(lines)[:size]


async def _folder(walker: Any) -> str | None:
    """The probes' folder: made, or (a create whose answer was lost) found by its name."""
    for _ in range(3):
        got = await walker._raw("POST", "/v1/folders/", body={"name": FOLDER})
        if got is not None and got.status_code == 200:
            return str(got.json()["id"])
        found = await walker._raw("GET", "/v1/folders/", params={"name": FOLDER, "limit": 1})
        if found is not None and found.status_code == 200 and found.json():
            return str(found.json()[0]["id"])
    walker.problems.append(f"contract uploads: no folder {FOLDER} could be made")
    return None


async def probe_uploads(walker: Any) -> None:
    folder = await _folder(walker)
    if folder is None:
        return
    sent: dict[str, tuple[str, str]] = {}  # file id -> (its name, the text sent)
    for k, (low, high) in enumerate(SIZES):
        text = upload_text(k, int(walker.rng.randint(low, high)))
        name = f"upload-{k}.txt"
        got = await walker._raw(
            "POST",
            f"/v1/folders/{folder}/upload",
            params={"duplicate_handling": "skip"},
            files={"file": (name, text.encode("ascii"), "text/plain")},
        )
        if got is None or got.status_code != 200:
            status = got.status_code if got is not None else "no answer"
            walker.problems.append(f"contract uploads: uploading {name} answered {status}")
            continue
        sent[str(got.json()["id"])] = (name, text)
    path = f"/v1/folders/{folder}/files"
    for _ in range(POLLS):
        listed = await walker._raw("GET", path, params={"limit": 1000})
        if listed is not None and listed.status_code == 200:
            states = {str(f["id"]): f["processing_status"] for f in listed.json()}
            if all(states.get(file_id) in DONE for file_id in sent):
                break
        await trio.sleep(1.0)
    for file_id, (name, text) in sent.items():
        got = await walker._raw("GET", f"{path}/{file_id}", params={"include_content": True})
        if got is None or got.status_code != 200:
            continue
        body = got.json()
        content = body.get("content")
        walker.log.uploads.append(
            UploadSeen(
                f"{name} ({file_id})",
                len(text),
                int(body.get("file_size") or 0),
                str(body.get("processing_status")),
                None if content is None else content == text,
                None if content is None else len(content),
            )
        )
