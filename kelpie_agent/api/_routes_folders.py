"""Folders (``/v1/folders/``), their files (upload, list, retrieve, delete) and the agents
they are attached to. Uploads are answered ``pending`` and processed in the background by the
node that took them (``service._folders``); the client polls ``files.retrieve`` for
``processing_status``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, File, Path, Query, UploadFile

from kelpie_agent.agent import ResourceNotFoundError
from kelpie_agent.service import _folders as folders

from ._context import current_service
from ._models_agents import AgentState, agent_out
from ._models_folders import (
    AgentFilesPage,
    FileMetadata,
    FolderCreate,
    FolderOut,
    FolderUpdate,
    agent_file_out,
    file_out,
    node_folder_out,
)
from ._params import ID_PATTERN, AgentId, Cursor
from ._routes_agents import MAX_PAGE, Deleted
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["folders_router"]

Limit = Annotated[int, Query(ge=0, le=MAX_PAGE)]
Fid = Annotated[str, Path(pattern=ID_PATTERN, description="A folder id (source-...)")]
FileId = Annotated[str, Path(pattern=ID_PATTERN, description="A file id (file-...)")]
Duplicates = Literal["skip", "error", "suffix", "replace"]


folder_out = node_folder_out


def folders_router() -> APIRouter:
    router = APIRouter(tags=["folders"], responses=ERROR_RESPONSES)

    async def create_folder(body: FolderCreate) -> FolderOut:
        """A new, empty folder (names are unique)."""
        return folder_out(
            await folders.create_folder(current_service(), body.name, **body.fields())
        )

    async def list_folders(
        name: str | None = None,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[FolderOut]:
        """Folders by creation (newest first by default), by name."""
        found = await folders.list_folders(
            current_service(),
            name=name,
            after=after,
            before=before,
            limit=limit,
            descending=order == "desc",
        )
        return [folder_out(f) for f in found]

    collection_route(router, "/v1/folders/", create_folder, ["POST"], response_model=FolderOut)
    collection_route(router, "/v1/folders/", list_folders, ["GET"], response_model=list[FolderOut])

    @router.get("/v1/folders/{folder_id}")
    async def get_folder(folder_id: Fid) -> FolderOut:
        return folder_out(await folders.get_folder(current_service(), folder_id))

    @router.patch("/v1/folders/{folder_id}")
    async def update_folder(folder_id: Fid, body: FolderUpdate) -> FolderOut:
        service = current_service()
        changes = body.changes()
        if not changes:
            return folder_out(await folders.get_folder(service, folder_id))
        return folder_out(await folders.update_folder(service, folder_id, changes))

    @router.delete("/v1/folders/{folder_id}")
    async def delete_folder(folder_id: Fid) -> Deleted:
        """Detach the folder from its agents, then delete it and its files."""
        await folders.delete_folder(current_service(), folder_id)
        return Deleted(message=f"Folder id={folder_id} successfully deleted")

    @router.get("/v1/folders/{folder_id}/agents")
    async def folder_agents(
        folder_id: Fid,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[str]:
        """Ids of the agents the folder is attached to (in id order; cursors are ids, relative
        to the listing order: a ``before`` page holds the agents nearest the cursor)."""
        ids = sorted(await folders.folder_agents(current_service(), folder_id))
        if order == "desc":
            ids.reverse()
        if after is not None:
            ids = ids[ids.index(after) + 1 :] if after in ids else []
        if before is not None:
            ids = ids[: ids.index(before)] if before in ids else []
            if after is None:  # only before: the page ends at the cursor
                return ids[len(ids) - limit :] if limit else []
        return ids[:limit]

    @router.post("/v1/folders/{folder_id}/upload")
    async def upload_file(
        folder_id: Fid,
        file: Annotated[UploadFile, File()],
        duplicate_handling: Duplicates = "suffix",
        name: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    ) -> FileMetadata:
        """Store the file (``pending``) and process it in the background; with ``skip`` and
        an existing name, the existing file is returned."""
        service = current_service()
        data = await file.read()
        file_name = name if name is not None else (file.filename or "")
        record = await folders.upload_file(
            service,
            folder_id,
            file_name,
            data,
            declared_type=file.content_type,
            duplicate_handling=duplicate_handling,
        )
        if record is None:  # skipped, and the file of that name deleted meanwhile
            raise ResourceNotFoundError("file", file_name)
        return file_out(record)

    @router.get("/v1/folders/{folder_id}/files")
    async def list_files(
        folder_id: Fid,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 1000,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at"] = "created_at",
        include_content: bool = False,
    ) -> list[FileMetadata]:
        service = current_service()
        found = await folders.list_files(
            service, folder_id, after=after, before=before, limit=limit, descending=order == "desc"
        )
        if not include_content:
            return [file_out(r) for r in found]
        return [file_out(r, await folders.file_content(service, r)) for r in found]

    @router.get("/v1/folders/{folder_id}/files/{file_id}")
    async def get_file(
        folder_id: Fid, file_id: FileId, include_content: bool = False
    ) -> FileMetadata:
        service = current_service()
        record = await folders.get_file(service, folder_id, file_id)
        content = await folders.file_content(service, record) if include_content else None
        return file_out(record, content)

    @router.delete("/v1/folders/{folder_id}/{file_id}", status_code=204, response_model=None)
    async def delete_file(folder_id: Fid, file_id: FileId) -> None:
        """Delete the file, its text and its passages (agents' open windows close)."""
        await folders.delete_file(current_service(), folder_id, file_id)

    @router.patch("/v1/agents/{agent_id}/folders/attach/{folder_id}")
    async def attach_folder(agent_id: AgentId, folder_id: Fid) -> AgentState:
        """Attach the folder: its files are opened in the agent's context (up to
        ``max_files_open``, least recently used closed first)."""
        return agent_out(await folders.attach_folder(current_service(), agent_id, folder_id))

    @router.patch("/v1/agents/{agent_id}/folders/detach/{folder_id}")
    async def detach_folder(agent_id: AgentId, folder_id: Fid) -> AgentState:
        return agent_out(await folders.detach_folder(current_service(), agent_id, folder_id))

    @router.get("/v1/agents/{agent_id}/folders")
    async def agent_folders(
        agent_id: AgentId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[FolderOut]:
        """The folders attached to the agent."""
        found = await folders.agent_folders(
            current_service(),
            agent_id,
            after=after,
            before=before,
            limit=limit,
            descending=order == "desc",
        )
        return [folder_out(f) for f in found]

    @router.get("/v1/agents/{agent_id}/files")
    async def agent_files(
        agent_id: AgentId,
        after: Cursor = None,
        before: Cursor = None,
        cursor: Cursor = None,
        is_open: bool | None = None,
        limit: Limit = 20,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at"] = "created_at",
    ) -> AgentFilesPage:
        """The files of the agent's attached folders, with whether each is open and its
        visible window (by upload time, newest first by default). ``cursor`` is Letta's
        deprecated name for ``after``."""
        service = current_service()
        found, more = await folders.agent_files(
            service,
            agent_id,
            is_open=is_open,
            after=after if after is not None else cursor,
            before=before,
            limit=limit,
            descending=order == "desc",
        )
        char_limit = (await service.get_agent(agent_id)).agent.per_file_view_window_char_limit
        rows = [agent_file_out(f, char_limit) for f in found]
        return AgentFilesPage(
            files=rows, next_cursor=rows[-1].id if rows and more else None, has_more=more
        )

    @router.patch("/v1/agents/{agent_id}/files/{file_id}/open")
    async def open_file(agent_id: AgentId, file_id: FileId) -> list[str]:
        """Open the file in the agent's context; answers the names of files closed to make
        room (``max_files_open``)."""
        return await folders.open_file(current_service(), agent_id, file_id)

    @router.patch("/v1/agents/{agent_id}/files/{file_id}/close")
    async def close_file(agent_id: AgentId, file_id: FileId) -> Deleted:
        await folders.close_files(current_service(), agent_id, file_id)
        return Deleted(message=f"File id={file_id} successfully closed")

    @router.patch("/v1/agents/{agent_id}/files/close-all")
    async def close_all_files(agent_id: AgentId) -> list[str]:
        """Close every open file; answers their names."""
        return await folders.close_files(current_service(), agent_id, None)

    return router
