"""Path parameters with the exact constraints the service enforces, stated in the schema.

The service checks ids, block labels and tool names with the agent core's patterns
(``kelpie_agent.agent``); declaring the same patterns here makes FastAPI refuse a bad value
first (a 422 naming ``path.<name>``) and lets the OpenAPI document say what a client may send,
so a client generated from the schema never sends a request the server refuses.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from kelpie_agent.agent._models import ID_PATTERN, LABEL_PATTERN
from kelpie_agent.llm._types import TOOL_NAME
from kelpie_agent.service._validate import NOT_BLANK

__all__ = [
    "ID_PATTERN",
    "LABEL_PATTERN",
    "RFC3339",
    "TOOL_NAME_PATTERN",
    "AgentId",
    "BlockId",
    "BlockLabel",
    "Cursor",
    "DateTimeQuery",
    "LabelQuery",
    "NonBlankQuery",
    "PassageId",
    "ToolId",
    "ToolName",
]

TOOL_NAME_PATTERN = TOOL_NAME.pattern

AgentId = Annotated[str, Path(pattern=ID_PATTERN, description="An agent id (agent-...)")]
BlockId = Annotated[str, Path(pattern=ID_PATTERN, description="A block id (block-...)")]
ToolId = Annotated[str, Path(pattern=ID_PATTERN, description="A tool id (tool-...)")]
PassageId = Annotated[str, Path(pattern=ID_PATTERN, description="A passage id (passage-...)")]
BlockLabel = Annotated[str, Path(pattern=LABEL_PATTERN, description="A block label")]
ToolName = Annotated[str, Path(pattern=TOOL_NAME_PATTERN, description="A tool name")]

# Query parameters (never null: leave one out for "none"; see _openapi).
Cursor = Annotated[str | None, Query(pattern=ID_PATTERN, description="An id from the listing")]
NonBlankQuery = Annotated[str | None, Query(pattern=NOT_BLANK)]
LabelQuery = Annotated[str | None, Query(pattern=LABEL_PATTERN, description="A block label")]
# RFC 3339 date-times (the schema's "date-time" format), checked as such: pydantic's own
# datetime parsing would also take dates, unix timestamps and other forms the schema refuses.
# One extension, kept for clients that send naive datetimes: no offset means UTC.
RFC3339 = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})?$"
)
DateTimeQuery = Annotated[
    str | None,
    Query(
        json_schema_extra={"format": "date-time"},
        description="An RFC 3339 date-time (without an offset: UTC)",
    ),
]
