"""Folders and files in Letta's shapes: ``Folder`` (with its ``embedding_config``), its
create/update bodies, ``FileMetadata`` (``folders.files`` upload/list/retrieve), and the
agent's view of its files (``agents.files.list``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from kelpie_agent.agent import AgentFile, FileRecord, Folder

from ._models_common import JsonObject, RequestModel, ResponseModel, epoch_datetime

__all__ = [
    "AgentFileOut",
    "AgentFilesPage",
    "EmbeddingConfig",
    "FileMetadata",
    "FolderCreate",
    "FolderOut",
    "FolderUpdate",
    "agent_file_out",
    "file_out",
    "folder_out",
    "node_folder_out",
]

Status = Literal["pending", "parsing", "embedding", "completed", "error"]


class FolderCreate(RequestModel):
    """``embedding_config`` is refused (422): Kelpie embeds with the node's embedder; name it
    with ``embedding`` (kept as the folder's handle)."""

    name: str = Field(min_length=1, max_length=200)
    description: str | None = None
    instructions: str | None = None
    metadata: JsonObject | None = None
    embedding: str | None = Field(default=None, min_length=1, max_length=200)
    embedding_chunk_size: int | None = Field(default=None, ge=16, le=100_000)
    embedding_config: None = None

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "description": self.description,
            "instructions": self.instructions,
            "embedding": self.embedding,
        }
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.embedding_chunk_size is not None:
            out["chunk_size"] = self.embedding_chunk_size
        return out


class FolderUpdate(RequestModel):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = None
    instructions: str | None = None
    metadata: JsonObject | None = None
    embedding_config: None = None

    def changes(self) -> dict[str, Any]:
        given = (
            ("name", self.name),
            ("description", self.description),
            ("instructions", self.instructions),
            ("metadata", self.metadata),
        )
        return {k: v for k, v in given if v is not None}


class EmbeddingConfig(ResponseModel):
    embedding_endpoint_type: str = "hugging-face"
    embedding_model: str
    embedding_dim: int
    embedding_chunk_size: int | None = None
    handle: str | None = None


class FolderOut(ResponseModel):
    id: str
    name: str
    embedding_config: EmbeddingConfig
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime | None = None


def folder_out(folder: Folder, model: str, dim: int) -> FolderOut:
    return FolderOut(
        id=folder.id,
        name=folder.name,
        embedding_config=EmbeddingConfig(
            embedding_model=model,
            embedding_dim=dim,
            embedding_chunk_size=folder.chunk_size,
            handle=folder.embedding,
        ),
        description=folder.description,
        instructions=folder.instructions,
        metadata=dict(folder.metadata),
        created_at=epoch_datetime(folder.created_at),
        updated_at=epoch_datetime(folder.updated_at),
    )


class FileMetadata(ResponseModel):
    id: str
    source_id: str
    file_name: str
    original_file_name: str
    file_type: str
    file_size: int
    processing_status: Status
    error_message: str | None = None
    total_chunks: int | None = None
    chunks_embedded: int | None = None
    content: str | None = None
    created_at: datetime
    updated_at: datetime | None = None


def file_out(record: FileRecord, content: str | None = None) -> FileMetadata:
    return FileMetadata(
        id=record.id,
        source_id=record.folder_id,
        file_name=record.file_name,
        original_file_name=record.original_file_name,
        file_type=record.file_type,
        file_size=record.file_size,
        processing_status=record.processing_status,  # type: ignore[arg-type]
        error_message=record.error_message,
        total_chunks=record.total_chunks,
        chunks_embedded=record.chunks_embedded,
        content=content,
        created_at=epoch_datetime(record.created_at),
        updated_at=epoch_datetime(record.updated_at),
    )


class AgentFileOut(ResponseModel):
    """Letta's file-agent row (``agents.files.list``). Its ``id`` is the file's id: an agent
    has one relationship per file, and the id is the page cursor."""

    id: str
    file_id: str
    file_name: str
    folder_id: str
    folder_name: str
    is_open: bool
    start_line: int | None = None
    end_line: int | None = None
    last_accessed_at: datetime | None = None
    visible_content: str | None = None


class AgentFilesPage(ResponseModel):
    files: list[AgentFileOut]
    next_cursor: str | None = None
    has_more: bool = False


def agent_file_out(item: AgentFile, char_limit: int) -> AgentFileOut:
    state = item.state
    return AgentFileOut(
        id=item.record.id,
        file_id=item.record.id,
        file_name=item.name,
        folder_id=item.folder.id,
        folder_name=item.folder.name,
        is_open=state.is_open,
        start_line=state.start_line,
        end_line=state.end_line,
        last_accessed_at=epoch_datetime(state.last_accessed_at) if state.last_accessed_at else None,
        visible_content=item.visible(char_limit) if state.is_open else None,
    )


def node_folder_out(folder: Folder) -> FolderOut:
    """A folder as the node shows it: with the node's embedder (a route's or a model's helper;
    needs the request's service)."""
    from kelpie_agent.agent._archive import embedder_name

    from ._context import current_service

    embedder = current_service().embedder
    return folder_out(folder, embedder_name(embedder), embedder.dimensions)
