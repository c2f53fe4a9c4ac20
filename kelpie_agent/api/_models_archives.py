"""Archives in Letta's shapes: ``Archive``, its create/update bodies and passage bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from kelpie_agent.agent import ArchiveRecord

from ._models_common import JsonObject, NonBlank, RequestModel, ResponseModel, epoch_datetime
from ._params import DateTime, epoch_seconds

__all__ = [
    "Archive",
    "ArchiveCreate",
    "ArchivePassage",
    "ArchivePassages",
    "ArchiveUpdate",
    "archive_out",
]


class ArchiveCreate(RequestModel):
    name: str = Field(min_length=1, max_length=200)
    description: str | None = None
    embedding: str | None = Field(default=None, max_length=200)
    metadata: JsonObject | None = None


class ArchiveUpdate(RequestModel):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = None

    def changes(self) -> dict[str, Any]:
        """The fields given (``null`` = unchanged; ``""`` clears the description)."""
        given = (("name", self.name), ("description", self.description))
        return {k: v for k, v in given if v is not None}


class ArchivePassage(RequestModel):
    """A passage for an archive (``created_at``: an RFC 3339 date-time; absent, now)."""

    text: NonBlank
    tags: list[str] | None = None
    metadata: JsonObject | None = None
    created_at: DateTime | None = None

    def item(
        self, field: str = "created_at"
    ) -> tuple[str, tuple[str, ...], dict[str, Any], float | None]:
        when = epoch_seconds(self.created_at, field, "body")
        return (self.text, tuple(self.tags or ()), dict(self.metadata or {}), when)


class ArchivePassages(RequestModel):
    passages: list[ArchivePassage] = Field(min_length=1, max_length=1000)


class Archive(ResponseModel):
    id: str
    name: str
    created_at: datetime
    updated_at: datetime | None = None
    description: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def archive_out(record: ArchiveRecord) -> Archive:
    return Archive(
        id=record.id,
        name=record.name,
        created_at=epoch_datetime(record.created_at),
        updated_at=epoch_datetime(record.updated_at),
        description=record.description,
        metadata=dict(record.metadata),
    )
