"""Tools in Letta's shapes: ``Tool`` (metadata under the JSON key ``metadata_``), create/update,
and the answer of running a tool."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from kelpie_agent.agent import ToolRunResult, ToolSpec

from ._models_common import JsonObject, NonBlank, RequestModel, ResponseModel, epoch_datetime

__all__ = [
    "Tool",
    "ToolCreate",
    "ToolRunRequest",
    "ToolRunResponse",
    "ToolUpdate",
    "tool_out",
    "tool_run_out",
]

MAX_RETURN_CHARS = 10_000_000


class Tool(ResponseModel):
    """A tool (Letta's Tool). ``json_schema`` is ``{name, description, parameters}``."""

    id: str
    name: str
    description: str | None = None
    json_schema: JsonObject = Field(default_factory=dict)
    source_code: str | None = None
    source_type: str | None = None
    tool_type: str
    tags: list[str] = Field(default_factory=list)
    return_char_limit: int
    metadata_: JsonObject = Field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ToolCreate(RequestModel):
    """``POST /v1/tools/`` and ``PUT /v1/tools/`` (upsert by the function's name)."""

    source_code: NonBlank
    description: str | None = None
    json_schema: JsonObject | None = None
    tags: list[str] | None = None
    return_char_limit: int | None = Field(default=None, ge=1, le=MAX_RETURN_CHARS)
    source_type: Literal["python"] | None = None


class ToolUpdate(RequestModel):
    """``PATCH /v1/tools/{id}``: only the fields given change."""

    source_code: NonBlank | None = None
    description: str | None = None
    json_schema: JsonObject | None = None
    tags: list[str] | None = None
    return_char_limit: int | None = Field(default=None, ge=1, le=MAX_RETURN_CHARS)
    metadata_: JsonObject | None = None
    source_type: Literal["python"] | None = None


class ToolRunRequest(RequestModel):
    """``POST /v1/agents/{id}/tools/{name}/run``."""

    args: JsonObject = Field(default_factory=dict)


class ToolRunResponse(ResponseModel):
    """Letta's ToolExecutionResult (without ``agent_state``)."""

    status: Literal["success", "error"]
    func_return: str
    stdout: list[str] = Field(default_factory=list)
    stderr: list[str] = Field(default_factory=list)


def tool_out(spec: ToolSpec) -> Tool:
    return Tool(
        id=spec.id,
        name=spec.name,
        description=spec.description or None,
        json_schema=dict(spec.json_schema),
        source_code=spec.source_code,
        source_type="python" if spec.source_code is not None else None,
        tool_type=spec.tool_type,
        tags=list(spec.tags),
        return_char_limit=spec.return_char_limit,
        metadata_=dict(spec.metadata),
        created_at=epoch_datetime(spec.created_at) if spec.created_at else None,
        updated_at=epoch_datetime(spec.updated_at) if spec.updated_at else None,
    )


def tool_run_out(result: ToolRunResult) -> ToolRunResponse:
    return ToolRunResponse(
        status=result.status,
        func_return=result.func_return,
        stdout=list(result.stdout),
        stderr=list(result.stderr),
    )
