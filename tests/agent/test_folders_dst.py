"""Folders and files in the agent core: uploads parsed (text, markdown, PDF), chunked and
embedded in the background, crash-safe (never completed with passages missing); attached to
agents (files opened with Letta's LRU, shown in the prompt's <directories>); the file tools."""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentStorageError,
    AttachFolder,
    CloseFile,
    DetachFolder,
    FolderStore,
    GetAgent,
    ListAgentFiles,
    OpenFile,
    ToolReturnMessage,
    UnsupportedFileError,
    builtin_id,
)
from kelpie_agent.agent._folders import file_passages, folder_files
from kelpie_agent.embeddings import HashingEmbedder
from kelpie_agent.llm import LlmRequest
from kelpie_dst.shims import open_kv, sim_ports
from kelpie_dst.shims.llm import Call, Reply

from .documents import make_pdf
from .harness import create_agent, make_env, node_kv, say

EMBEDDER = HashingEmbedder()
NOTES_TXT = "docs/notes.txt"
NOTES = "\n".join(f"line {i}: the otter counts {i} shells" for i in range(1, 41))
GUIDE = "# Guide\n\nOtters float on their backs. They hold hands while sleeping. " * 30


async def _processed(store: FolderStore, folder_id: str) -> dict[str, Any]:
    for file_id in await store.pending():
        await store.process(file_id, EMBEDDER, EMBEDDER.name)
    return {f.file_name: f for f in await store.files(folder_id)}


@pytest.mark.dst(seeds=2, guards="strict")
async def test_uploads_are_parsed_chunked_and_embedded() -> None:
    kv = node_kv()
    store = FolderStore(kv, sim_ports())
    folder = await store.create("docs", description="Otter facts")
    await store.upload(folder.id, "notes.txt", NOTES.encode())
    await store.upload(folder.id, "guide.md", GUIDE.encode())
    await store.upload(folder.id, "paper.pdf", make_pdf(["Otters use tools", "Kelp forests"]))
    await store.upload(folder.id, "broken.pdf", b"%PDF-1.4 not really")
    dup = await store.upload(folder.id, "notes.txt", b"again")  # Letta's default: a suffix
    assert dup is not None and dup.file_name == "notes_(1).txt"
    with pytest.raises(UnsupportedFileError):
        await store.upload(folder.id, "photo.jpg", b"\xff\xd8")
    files = await _processed(store, folder.id)
    for name in ("notes.txt", "guide.md", "paper.pdf", "notes_(1).txt"):
        record = files[name]
        assert record.processing_status == "completed", record
        passages = await file_passages(kv, record.id)
        assert len(passages) == record.total_chunks == record.chunks_embedded >= 1
    assert "Kelp forests" in await store.content(files["paper.pdf"])
    broken = files["broken.pdf"]
    assert broken.processing_status == "error" and "not a readable PDF" in broken.error_message
    assert await store.pending() == []


@pytest.mark.dst(seeds=10, guards="strict")
async def test_a_crash_during_processing_never_leaves_a_file_done_but_half_indexed(
    dst: kelpie_dst.Simulation,
) -> None:
    db = dst.add_node("db")
    kv = open_kv(dst.current_node(), host=db)  # type: ignore[arg-type]
    store = FolderStore(kv, sim_ports())
    folder = await store.create("big")
    text = "\n\n".join(f"Paragraph {i}. " + "otters " * 150 for i in range(60))
    record = await store.upload(folder.id, "big.txt", text.encode())
    assert record is not None
    seen: list[str] = []

    async def worker(node: kelpie_dst.Node) -> None:
        mine = FolderStore(open_kv(node, host=db), sim_ports(node))
        while True:
            for file_id in await mine.pending():
                await mine.process(file_id, EMBEDDER, EMBEDDER.name)
            await trio.sleep(1.0)

    async def watch() -> None:  # the oracle: completed implies every passage is there
        while True:
            for f in await folder_files(kv, folder.id):
                seen.append(f.processing_status)
                if f.processing_status == "completed":
                    passages = await file_passages(kv, f.id)
                    assert len(passages) == f.total_chunks, (len(passages), f.total_chunks)
            await trio.sleep(0.05)

    node = dst.add_node("worker", worker)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        for _ in range(2):
            await trio.sleep(dst.rng("test/crash").uniform(0.0, 0.5))
            dst.crash(node)
            dst.restart(node, after=0.3)
        while (await store.file(record.id)).processing_status != "completed":
            await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    done = await store.file(record.id)
    assert done.chunks_embedded == done.total_chunks == len(await file_passages(kv, record.id))
    assert "completed" in seen


@attrs.define
class FilePolicy:
    """Plays a script of tool calls (one per step), records the system prompts."""

    script: list[tuple[str, dict[str, Any]]]
    systems: list[str] = attrs.field(factory=list)

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        self.systems.append(request.system)
        if not self.script:
            return ("done",)
        name, args = self.script.pop(0)
        return (Call(name, args),)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_attached_files_appear_in_context_and_the_file_tools_work() -> None:
    kv = node_kv()
    store = FolderStore(kv, sim_ports())
    folder = await store.create("docs", instructions="Read the notes first")
    await store.upload(folder.id, "notes.txt", NOTES.encode())
    await trio.sleep(1)  # uploaded later: opened last when the folder is attached
    await store.upload(folder.id, "guide.md", GUIDE.encode())
    files = await _processed(store, folder.id)
    policy = FilePolicy(
        [
            (
                "open_files",
                {"file_requests": [{"file_name": "docs/notes.txt", "offset": 9, "length": 3}]},
            ),
            ("grep_files", {"pattern": "counts 3[0-9]", "context_lines": 0}),
            ("semantic_search_files", {"query": "otters sleeping holding hands", "limit": 2}),
            ("open_files", {"file_requests": [{"file_name": "docs/missing.txt"}]}),
        ]
    )
    actor, view = await create_agent(make_env(policy), kv, max_files_open=1)
    await actor.handle(AttachFolder(folder.id))
    agent = (await actor.handle(GetAgent())).agent
    assert agent.folder_ids == (folder.id,)
    assert builtin_id("grep_files") in agent.tool_ids
    listed = await actor.handle(ListAgentFiles())
    assert sum(f.state.is_open for f in listed) == 1  # max_files_open=1: the LRU rule
    result = await say(actor, "read")
    returns = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    opened, grep, semantic, missing = (json.loads(r.tool_return)["message"] for r in returns)
    assert opened.startswith("* Opened docs/notes.txt (lines 10-12)")
    assert "Closed 1 least recently used file(s)" in opened
    assert "Found 10 total matches across 1 files" in grep and "> 30: line 30" in grep
    assert "docs/guide.md" in semantic
    assert returns[3].status == "error" and "not attached" in missing
    later = policy.systems[1]  # the prompt after open_files: the window of notes.txt
    assert '<directory name="docs">' in later and "<instructions>Read the notes first" in later
    assert '<file status="open" name="docs/notes.txt">' in later
    assert "10: line 10: the otter counts 10 shells" in later and "13: line 13" not in later
    assert '<file status="closed" name="docs/guide.md">' in later
    closed = await actor.handle(CloseFile(None))
    assert closed == ["docs/notes.txt"]
    assert await actor.handle(OpenFile(files["guide.md"].id)) == []
    await actor.handle(DetachFolder(folder.id))
    agent = (await actor.handle(GetAgent())).agent
    assert agent.folder_ids == () and builtin_id("grep_files") not in agent.tool_ids
    assert await store.agents(folder.id) == []
    del view


@pytest.mark.dst(seeds=3, guards="strict", faults=["storage.commit_unknown=0.5"])
async def test_a_folder_whose_create_commit_outcome_is_unknown_is_made_once() -> None:
    """A commit can apply and still fail; the store's retry then runs the create again and
    must find its own folder under the name, not refuse the name as taken (a 400 for a
    create that succeeded). Found by agent_api_surface seed 11 (apiE, session 10)."""
    store = FolderStore(node_kv(), sim_ports())
    for n in range(8):
        try:
            folder = await store.create(f"docs-{n}", description="Otter facts")
        except AgentStorageError:
            continue  # the store gave up: nothing is claimed
        found = [f for f in await store.all() if f.name == f"docs-{n}"]
        assert [f.id for f in found] == [folder.id]


@pytest.mark.dst(seeds=3, guards="strict", faults=["storage.commit_unknown=0.5"])
async def test_an_upload_whose_commit_outcome_is_unknown_keeps_its_name_and_is_stored_once() -> (
    None
):
    """The upload's retry after an ambiguous commit found its own file under the name and
    renamed it (``suffix``: notes_(1).txt) or refused it (``error``: a 400 for an upload that
    succeeded)."""
    store = FolderStore(node_kv(), sim_ports())
    folder = None
    while folder is None:
        try:
            folder = await store.create("docs")
        except AgentStorageError:
            continue
    for n in range(8):
        how = ("suffix", "error")[n % 2]
        try:
            record = await store.upload(
                folder.id, f"notes-{n}.txt", NOTES.encode(), duplicate_handling=how
            )
        except AgentStorageError:
            continue
        assert record is not None and record.file_name == f"notes-{n}.txt"
        named = [
            f.id
            for f in await store.files(folder.id)
            if f.original_file_name == record.original_file_name
        ]
        assert named == [record.id]


@pytest.mark.dst(seeds=3, guards="strict", faults=["storage.commit_unknown=0.5"])
async def test_a_folder_delete_whose_commits_lose_their_answers_deletes_it() -> None:
    """A file delete's retry after an ambiguous commit found its file gone and raised "file not
    found", so deleting the folder (and a file) answered 404 and left the folder (a real bug
    found by schedJ, session 14)."""
    store = FolderStore(node_kv(), sim_ports())
    folder = None
    while folder is None:
        try:
            folder = await store.create("docs")
        except AgentStorageError:
            continue
    for n in range(6):
        try:
            await store.upload(folder.id, f"notes-{n}.txt", NOTES.encode())
        except AgentStorageError:
            continue
    while True:
        try:
            await store.delete(folder.id)
        except AgentStorageError:
            continue
        break
    assert [f.id for f in await store.all() if f.id == folder.id] == []
