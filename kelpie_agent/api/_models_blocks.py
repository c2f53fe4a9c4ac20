"""Memory blocks in Letta's shapes: ``Block`` (the SDK's ``BlockResponse``), create and update."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from kelpie_agent.agent import Block as BlockRecord

from ._models_common import JsonObject, Label, RequestModel, ResponseModel, epoch_datetime

__all__ = ["Block", "BlockCreate", "BlockUpdate", "block_out"]

# A block's character limit: Letta's default is 20,000; the upper bound keeps values storable.
MAX_BLOCK_LIMIT = 10_000_000


class Block(ResponseModel):
    """A memory block (Letta's Block / BlockResponse)."""

    id: str
    label: str
    value: str
    limit: int
    description: str | None = None
    read_only: bool = False
    metadata: JsonObject = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None


class BlockCreate(RequestModel):
    """``POST /v1/blocks/`` and ``memory_blocks`` entries of ``POST /v1/agents/``."""

    label: Label
    value: str = ""
    limit: int | None = Field(default=None, ge=1, le=MAX_BLOCK_LIMIT)
    description: str | None = None
    read_only: bool = False
    metadata: JsonObject | None = None


class BlockUpdate(RequestModel):
    """``PATCH`` of a block: only the fields given change (``null`` means unchanged)."""

    value: str | None = None
    limit: int | None = Field(default=None, ge=1, le=MAX_BLOCK_LIMIT)
    description: str | None = None
    label: Label | None = None
    read_only: bool | None = None
    metadata: JsonObject | None = None

    def changes(self) -> dict[str, Any]:
        """The fields the client set to a value (``null`` and absent fields are skipped)."""
        return {
            name: getattr(self, name)
            for name in ("value", "limit", "description", "label", "read_only", "metadata")
            if getattr(self, name) is not None
        }


def block_out(block: BlockRecord) -> Block:
    return Block(
        id=block.id,
        label=block.label,
        value=block.value,
        limit=block.limit,
        description=block.description or None,
        read_only=block.read_only,
        metadata=dict(block.metadata),
        created_at=epoch_datetime(block.created_at) if block.created_at else None,
        updated_at=epoch_datetime(block.updated_at) if block.updated_at else None,
    )
