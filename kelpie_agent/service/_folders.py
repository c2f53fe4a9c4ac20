"""Folders and their files through the service (Letta's ``folders``, ``folders.files`` and
``folders.agents``). Functions of an :class:`AgentService`, as ``_archives``.

Folder and file records are written by :class:`FolderStore` in plain transactions (a folder is
not an actor). An upload is stored with a processing job in one transaction and answered at
once (``pending``); the node that took it then parses and embeds it in the background
(``_spawn``). Every job stays in the store until its file is ``completed`` or ``error``, and
processing is idempotent, so a crash mid-way loses nothing: :func:`resume_uploads` (run by
every node when it starts) redoes every unfinished job. A run that storage makes give up is
retried with backoff on the node that had it (:func:`process_until_done`), so storage failing
for a while never leaves a file unfinished until some node restarts. A file is never reported
``completed`` before all its passages are committed (``FolderStore.process`` marks it in a
transaction after the last passage batch's).
"""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from kelpie_agent.agent import (
    AgentFile,
    AgentStorageError,
    AgentView,
    AttachFolder,
    CloseFile,
    DetachFolder,
    FileRecord,
    Folder,
    FolderStore,
    ListAgentFiles,
    OpenFile,
)
from kelpie_agent.agent._archive import embedder_name
from kelpie_agent.storage import StorageError

from ._errors import NotFoundError
from ._types import paginate

if TYPE_CHECKING:
    from ._service import AgentService

__all__ = [
    "agent_files",
    "agent_folders",
    "attach_folder",
    "close_files",
    "create_folder",
    "delete_file",
    "delete_folder",
    "detach_folder",
    "file_content",
    "folder_agents",
    "get_file",
    "get_folder",
    "list_files",
    "list_folders",
    "open_file",
    "process_until_done",
    "process_upload",
    "resume_uploads",
    "update_folder",
    "upload_file",
]

T = TypeVar("T")
RETRY_FIRST = 1.0  # seconds before the first retry of a run storage made give up
RETRY_MAX = 30.0  # ... doubling up to this


async def _call(service: AgentService, op: Callable[[], Awaitable[T]]) -> T:
    """A store call with the service's checks and error mapping (writes retry themselves)."""
    return await service._store(op, "", retry=False)


def _store(service: AgentService) -> FolderStore:
    return FolderStore(service.kv, service.ports)


async def create_folder(service: AgentService, name: str, **fields: Any) -> Folder:
    return await _call(service, lambda: _store(service).create(name, **fields))


async def get_folder(service: AgentService, folder_id: str) -> Folder:
    return await _call(service, lambda: _store(service).get(folder_id))


async def list_folders(
    service: AgentService,
    *,
    name: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    descending: bool = True,
) -> list[Folder]:
    found = await _call(service, _store(service).all)
    if name is not None:
        found = [f for f in found if f.name == name]
    return paginate(
        found,
        lambda f: f.id,
        kind="folder",
        after=after,
        before=before,
        limit=limit,
        descending=descending,
    )


async def update_folder(
    service: AgentService, folder_id: str, changes: Mapping[str, Any]
) -> Folder:
    return await _call(service, lambda: _store(service).update(folder_id, **changes))


async def delete_folder(service: AgentService, folder_id: str) -> None:
    """Detach the folder from its agents (through their actors), then delete it and its
    files."""
    store = _store(service)
    for agent_id in await _call(service, lambda: store.agents(folder_id)):
        await service._request(agent_id, DetachFolder(folder_id), settled=_detached)
    await _call(service, lambda: store.delete(folder_id))


async def folder_agents(service: AgentService, folder_id: str) -> list[str]:
    return await _call(service, lambda: _store(service).agents(folder_id))


async def upload_file(
    service: AgentService,
    folder_id: str,
    name: str,
    data: bytes,
    *,
    declared_type: str | None,
    duplicate_handling: str,
) -> FileRecord | None:
    """Store the upload and its job, then process it in the background on this node."""
    store = _store(service)
    record = await _call(
        service,
        lambda: store.upload(
            folder_id,
            name,
            data,
            declared_type=declared_type,
            duplicate_handling=duplicate_handling,
        ),
    )
    if record is None:  # ``skip``: the file already there under that name is the answer
        clean = posixpath.basename(name.replace("\\", "/")).strip()
        kept = [f for f in await list_files(service, folder_id) if f.file_name == clean]
        return kept[0] if kept else None
    file_id = record.id
    service._spawn(f"processing file {file_id}", lambda: process_until_done(service, file_id))
    return record


async def process_upload(service: AgentService, file_id: str) -> FileRecord | None:
    """Parse and embed one stored upload with the node's embedder (idempotent)."""
    embedder = service.embedder
    done = await _store(service).process(file_id, embedder, embedder_name(embedder))
    service.observe(
        "folders.file_processed",
        file_id=file_id,
        status=None if done is None else done.processing_status,
    )
    return done


async def process_until_done(service: AgentService, file_id: str) -> FileRecord | None:
    """:func:`process_upload`, run again after ``RETRY_FIRST`` (doubling up to ``RETRY_MAX``)
    seconds while storage makes it give up, for as long as the node runs: its job would
    otherwise wait, unfinished, for some node to restart (Dchaos18-5)."""
    delay = RETRY_FIRST
    while True:
        try:
            return await process_upload(service, file_id)
        except (AgentStorageError, StorageError) as error:
            service.observe("folders.file_retry", file_id=file_id, error=repr(error), delay=delay)
            await trio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)


async def resume_uploads(service: AgentService, limit: int = 50) -> list[str]:
    """Process every unfinished upload job (those a crash interrupted), each until it is
    done (:func:`process_until_done`); returns their ids."""
    pending = await _call(service, lambda: _store(service).pending(limit))
    for file_id in pending:
        await process_until_done(service, file_id)
    return pending


async def list_files(
    service: AgentService,
    folder_id: str,
    *,
    after: str | None = None,
    before: str | None = None,
    limit: int = 1000,
    descending: bool = True,
) -> list[FileRecord]:
    found = await _call(service, lambda: _store(service).files(folder_id))
    ordered = sorted(found, key=lambda f: (f.created_at, f.id))
    return paginate(
        ordered,
        lambda f: f.id,
        kind="file",
        after=after,
        before=before,
        limit=limit,
        descending=descending,
    )


async def get_file(service: AgentService, folder_id: str, file_id: str) -> FileRecord:
    store = _store(service)
    await _call(service, lambda: store.get(folder_id))
    return await _call(service, lambda: store.file(file_id, folder_id))


async def file_content(service: AgentService, record: FileRecord) -> str | None:
    """The parsed text (``None`` until the file is parsed)."""
    if record.text_chunks == 0 and record.processing_status != "completed":
        return None
    return await _call(service, lambda: _store(service).content(record))


async def delete_file(service: AgentService, folder_id: str, file_id: str) -> None:
    store = _store(service)
    await _call(service, lambda: store.get(folder_id))
    await _call(service, lambda: store.delete_file(folder_id, file_id))


async def attach_folder(service: AgentService, agent_id: str, folder_id: str) -> AgentView:
    """Attach through the agent's actor (it writes the agent and the folder's link in one
    transaction and opens the folder's files up to ``max_files_open``)."""
    await service._agent(agent_id)
    await get_folder(service, folder_id)
    await service._request(agent_id, AttachFolder(folder_id))
    return await service.get_agent(agent_id)


async def detach_folder(service: AgentService, agent_id: str, folder_id: str) -> AgentView:
    await service._agent(agent_id)
    await get_folder(service, folder_id)
    await service._request(agent_id, DetachFolder(folder_id), settled=_detached)
    return await service.get_agent(agent_id)


def _detached(error: Exception) -> bool:
    """``settled`` for a detach: after an attempt whose outcome was lost, "not attached"
    means that attempt detached it."""
    return isinstance(error, NotFoundError) and error.kind == "folder"


async def agent_folders(
    service: AgentService,
    agent_id: str,
    *,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    descending: bool = True,
) -> list[Folder]:
    """The folders attached to the agent, by creation."""
    attached = set((await service._agent(agent_id)).folder_ids)
    found = [f for f in await _call(service, _store(service).all) if f.id in attached]
    return paginate(
        found,
        lambda f: f.id,
        kind="folder",
        after=after,
        before=before,
        limit=limit,
        descending=descending,
    )


async def agent_files(
    service: AgentService,
    agent_id: str,
    *,
    is_open: bool | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    descending: bool = True,
) -> tuple[list[AgentFile], bool]:
    """The files of the agent's attached folders with their state and, when open, their text
    (through its actor), by upload time; ``is_open`` keeps the open (or the closed) ones. The
    cursors are file ids. Also answers whether more files follow the page."""
    await service._agent(agent_id)
    found: list[AgentFile] = await service._request(agent_id, ListAgentFiles())
    if is_open is not None:
        found = [f for f in found if f.state.is_open == is_open]
    found.sort(key=lambda f: (f.record.created_at, f.record.id))
    page = paginate(
        found,
        lambda f: f.record.id,
        kind="file",
        after=after,
        before=before,
        limit=limit + 1,
        descending=descending,
    )
    return page[:limit], len(page) > limit


async def open_file(service: AgentService, agent_id: str, file_id: str) -> list[str]:
    """Open the file in the agent's context (through its actor); the names of the files
    closed to make room (least recently used first)."""
    await service._agent(agent_id)
    closed: list[str] = await service._request(agent_id, OpenFile(file_id))
    return closed


async def close_files(service: AgentService, agent_id: str, file_id: str | None) -> list[str]:
    """Close one file, or every open file (``None``); the names closed."""
    await service._agent(agent_id)
    closed: list[str] = await service._request(agent_id, CloseFile(file_id))
    return closed
