"""Folders and files through the real letta-client (strict response validation): create,
list, retrieve, update, upload (answered ``pending``, processed in the background until
``completed``, its text readable with ``include_content``), duplicate handling, delete; bad
input is a 422 naming the field, unknown ids 404. Same seed, same trace hash."""

from __future__ import annotations

import httpx
import letta_client
import pytest
import trio
from letta_client import AsyncLetta
from letta_client.types.folders import (
    FileListResponse,
    FileRetrieveResponse,
    FileUploadResponse,
)

import kelpie_dst

from .harness import BASE, STRICT, api

GUARDS = {**STRICT, "guard_allow": (*STRICT["guard_allow"], "letta_client", "anyio")}
# these SDK models build their schema on first use; a simulation's datetime guard would be in
# place by then, so they are built here, at import
for _model in (FileListResponse, FileRetrieveResponse, FileUploadResponse):
    _model.model_rebuild(force=True)
TEXT = "Otters hold hands while they sleep.\n\nSea kelp forests shelter them. " * 40


async def _settled(client: AsyncLetta, folder_id: str, file_id: str) -> str:
    """Poll the file as a client would until its processing is finished."""
    for _ in range(200):
        got = await client.folders.files.retrieve(file_id, folder_id=folder_id)
        if got.processing_status in ("completed", "error"):
            return got.processing_status
        await trio.sleep(0.05)
    raise AssertionError(f"file {file_id} still {got.processing_status}")


async def folders_flow() -> list[str]:
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        docs = await client.folders.create(
            name="docs",
            description="field notes",
            instructions="cite them",
            embedding_chunk_size=200,
            metadata={"k": 1},
        )
        assert docs.id.startswith("source-") and docs.embedding_config.embedding_chunk_size == 200
        await trio.sleep(1)  # virtual time: the listing orders by creation
        other = await client.folders.create(name="other")
        assert [f.id async for f in client.folders.list()] == [other.id, docs.id]
        assert [f.id async for f in client.folders.list(name="docs")] == [docs.id]
        first = await client.folders.list(order="asc", limit=1)  # one page
        assert [f.id for f in first.items] == [docs.id]
        renamed = await client.folders.update(other.id, name="renamed", instructions="x")
        assert (renamed.name, renamed.instructions) == ("renamed", "x")
        assert (await client.folders.retrieve(docs.id)).description == "field notes"

        up = await client.folders.files.upload(docs.id, file=("otters.txt", TEXT.encode()))
        assert up.processing_status == "pending" and up.source_id == docs.id
        assert await _settled(client, docs.id, up.id) == "completed"
        done = await client.folders.files.retrieve(up.id, folder_id=docs.id, include_content=True)
        assert done.content is not None and "Otters hold hands" in done.content
        assert done.total_chunks == done.chunks_embedded and (done.total_chunks or 0) > 1
        await trio.sleep(1)
        again = await client.folders.files.upload(docs.id, file=("otters.txt", b"second"))
        assert again.file_name == "otters_(1).txt"
        skipped = await client.folders.files.upload(
            docs.id, file=("otters.txt", b"third"), duplicate_handling="skip"
        )
        assert skipped.id == up.id
        with pytest.raises(letta_client.BadRequestError):
            await client.folders.files.upload(
                docs.id, file=("otters.txt", b"x"), duplicate_handling="error"
            )
        listed = [f.id async for f in client.folders.files.list(docs.id, order="asc")]
        assert listed == [up.id, again.id]
        assert await client.folders.agents.list(docs.id) == []
        ada = await client.agents.create(name="ada")
        await client.agents.folders.attach(docs.id, agent_id=ada.id)
        assert await client.folders.agents.list(docs.id) == [ada.id]
        assert [f.id async for f in client.agents.folders.list(ada.id)] == [docs.id]
        await client.agents.folders.detach(docs.id, agent_id=ada.id)
        assert [f.id async for f in client.agents.folders.list(ada.id)] == []
        await client.agents.folders.attach(docs.id, agent_id=ada.id)
        closed = await client.agents.files.close_all(ada.id)
        assert sorted(closed) == ["docs/otters.txt", "docs/otters_(1).txt"]
        assert await client.agents.files.open(up.id, agent_id=ada.id) == []
        rows = [f async for f in client.agents.files.list(ada.id, order="asc")]
        assert [(f.file_id, f.is_open) for f in rows] == [(up.id, True), (again.id, False)]
        assert rows[0].file_name == "docs/otters.txt" and rows[0].folder_name == "docs"
        assert rows[0].visible_content and "Otters hold hands" in rows[0].visible_content
        assert rows[1].visible_content is None
        opened = [f.file_id async for f in client.agents.files.list(ada.id, is_open=True)]
        assert opened == [up.id]
        newest = await client.agents.files.list(ada.id, limit=1)  # newest first, two pages
        assert [f.file_id for f in newest.files] == [again.id] and newest.has_more
        paged = [f.file_id async for f in client.agents.files.list(ada.id, limit=1)]
        assert paged == [again.id, up.id]
        await client.agents.files.close(up.id, agent_id=ada.id)
        assert [f.file_id async for f in client.agents.files.list(ada.id, is_open=True)] == []
        assert await client.agents.files.close_all(ada.id) == []
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.folders.attach("source-missing", agent_id=ada.id)
        # the agent shows its folders as Letta's sources; agents.create attaches folder_ids
        state = await client.agents.retrieve(ada.id)
        assert [(s.id, s.name) for s in state.sources] == [(docs.id, "docs")]
        assert state.sources[0].embedding_config.embedding_dim == 512
        bo = await client.agents.create(name="bo", folder_ids=[docs.id])
        assert [s.id for s in bo.sources] == [docs.id]
        assert sorted(await client.folders.agents.list(docs.id)) == sorted([ada.id, bo.id])
        bo_open = [f.file_id async for f in client.agents.files.list(bo.id, is_open=True)]
        assert sorted(bo_open) == sorted([up.id, again.id])  # attached with its files opened
        assert "grep_files" in [t.name for t in bo.tools]
        with pytest.raises(letta_client.NotFoundError, match="source-missing"):
            await client.agents.create(name="cy", folder_ids=[docs.id, "source-missing"])
        assert [a.name async for a in client.agents.list(name="cy")] == []
        await client.agents.delete(bo.id)

        await client.folders.files.delete(again.id, folder_id=docs.id)
        with pytest.raises(letta_client.NotFoundError):
            await client.folders.files.retrieve(again.id, folder_id=docs.id)
        await client.folders.delete(other.id)
        await client.folders.delete(docs.id)  # detached from ada first
        assert [f.id async for f in client.agents.folders.list(ada.id)] == []
        docs = await client.folders.create(name="docs")
        assert [f.id async for f in client.folders.list()] == [docs.id]
        with pytest.raises(letta_client.NotFoundError):
            await client.folders.retrieve(other.id)
        with pytest.raises(letta_client.UnprocessableEntityError):
            await client.folders.create(name="")
        with pytest.raises(letta_client.UnprocessableEntityError) as refused:
            await client.folders.create(
                name="e",
                embedding_config={  # type: ignore[typeddict-item]
                    "embedding_model": "m",
                    "embedding_dim": 3,
                    "embedding_endpoint_type": "openai",
                },
            )
        assert "embedding_config" in str(refused.value)
        await http.aclose()
    seen = f"{docs.id} {up.id} {done.total_chunks} {done.updated_at}"
    kelpie_dst.log("api.answer", body=seen)
    return [seen]


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_folders_and_files_through_letta_client() -> None:
    await folders_flow()


def test_folders_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(folders_flow, seeds=(1,), runs=2, **GUARDS)


async def resume_flow() -> list[str]:
    """A node stops with an upload stored but unprocessed (as a crash right after the upload
    leaves it); the next node to start processes it: it ends ``completed``, with every
    passage, never stuck ``pending``."""
    from kelpie_agent.agent import FolderStore
    from kelpie_agent.agent._folders import file_passages

    from .harness import service_node

    async with service_node() as first:
        folder = await FolderStore(first.kv, first.ports).create("docs", chunk_size=200)
        stored = await FolderStore(first.kv, first.ports).upload(folder.id, "o.txt", TEXT.encode())
        assert stored is not None and stored.processing_status == "pending"
    async with service_node() as second:
        store = FolderStore(second.kv, second.ports)
        for _ in range(200):
            record = await store.file(stored.id)
            if record.done:
                break
            await trio.sleep(0.05)
        assert record.processing_status == "completed"
        passages = await file_passages(second.kv, stored.id)
        assert len(passages) == record.total_chunks == record.chunks_embedded
        assert await store.pending() == []
    seen = f"{record.id} {record.total_chunks} {record.updated_at}"
    kelpie_dst.log("api.answer", body=seen)
    return [seen]


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_an_upload_left_unprocessed_is_processed_by_the_next_node() -> None:
    await resume_flow()


def test_upload_resume_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(resume_flow, seeds=(1,), runs=2, **GUARDS)


@pytest.mark.dst(seeds=1, **GUARDS)
async def test_a_folders_agents_before_page_holds_the_agents_nearest_the_cursor() -> None:
    """``folders.agents.list(before=X, limit=n)`` is the ``n`` agents just before X in the
    listing order (Letta's cursors), both orders: a client paging back from the last agent
    sees every agent once (it used to get the first ``n`` of the list, skipping the rest)."""
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        folder = await client.folders.create(name="shared")
        for name in ("ann", "bo", "cy", "di"):
            agent = await client.agents.create(name=name)
            await client.agents.folders.attach(folder.id, agent_id=agent.id)
        for order in ("asc", "desc"):
            whole = await client.folders.agents.list(folder.id, order=order, limit=50)
            assert len(whole) == 4
            assert (
                await client.folders.agents.list(folder.id, order=order, before=whole[3], limit=2)
                == whole[1:3]
            )
            assert (
                await client.folders.agents.list(
                    folder.id, order=order, after=whole[0], before=whole[3], limit=1
                )
                == whole[1:2]
            )
            back, anchor = [whole[3]], whole[3]
            while page := await client.folders.agents.list(
                folder.id, order=order, before=anchor, limit=1
            ):
                back[:0] = page
                anchor = page[0]
            assert back == whole
        await http.aclose()


async def imported_files_flow() -> list[str]:
    """An agent file's uploaded files are processed on the importing node, as an upload is:
    the copy's files end ``completed`` and its open files show their text, with no node
    restarting (they used to stay ``pending`` until one did, found by ``cold_restart``)."""
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        docs = await client.folders.create(name="docs")
        up = await client.folders.files.upload(docs.id, file=("otters.txt", TEXT.encode()))
        assert await _settled(client, docs.id, up.id) == "completed"
        ada = await client.agents.create(name="ada", folder_ids=[docs.id])
        exported = await client.agents.export_file(ada.id)
        [copy_id] = (await client.agents.import_file(file=("ada.af", exported.encode()))).agent_ids
        [folder] = [f async for f in client.agents.folders.list(copy_id)]
        assert folder.id != docs.id
        [file] = [f async for f in client.folders.files.list(folder.id)]
        assert await _settled(client, folder.id, file.id) == "completed"
        [row] = [f async for f in client.agents.files.list(copy_id)]
        assert row.is_open and row.visible_content and "Otters hold hands" in row.visible_content
        await http.aclose()
    seen = f"{copy_id} {file.id} {row.visible_content[:40]}"
    kelpie_dst.log("api.answer", body=seen)
    return [seen]


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_an_imported_agent_files_uploads_are_processed_without_a_restart() -> None:
    await imported_files_flow()


def test_imported_files_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(imported_files_flow, seeds=(1,), runs=2, **GUARDS)
