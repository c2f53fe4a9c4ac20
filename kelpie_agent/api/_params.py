"""Path parameters with the exact constraints the service enforces, stated in the schema.

The service checks ids, block labels and tool names with the agent core's patterns
(``kelpie_agent.agent``); declaring the same patterns here makes FastAPI refuse a bad value
first (a 422 naming ``path.<name>``) and lets the OpenAPI document say what a client may send,
so a client generated from the schema never sends a request the server refuses.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Path, Query
from pydantic import Field, StringConstraints, TypeAdapter, ValidationError

from kelpie_agent.agent._models import ID_PATTERN, LABEL_PATTERN
from kelpie_agent.llm._types import TOOL_NAME
from kelpie_agent.service import InvalidError
from kelpie_agent.service._validate import NOT_BLANK

__all__ = [
    "ID_PATTERN",
    "LABEL_PATTERN",
    "RFC3339",
    "TOOL_NAME_PATTERN",
    "AgentId",
    "ArchiveId",
    "BlockId",
    "BlockLabel",
    "Cursor",
    "DateTime",
    "DateTimeQuery",
    "IdListQuery",
    "IdQuery",
    "LabelQuery",
    "MessageId",
    "NonBlankQuery",
    "PassageId",
    "RunId",
    "ToolId",
    "ToolName",
    "epoch_seconds",
]

TOOL_NAME_PATTERN = TOOL_NAME.pattern

AgentId = Annotated[str, Path(pattern=ID_PATTERN, description="An agent id (agent-...)")]
BlockId = Annotated[str, Path(pattern=ID_PATTERN, description="A block id (block-...)")]
ToolId = Annotated[str, Path(pattern=ID_PATTERN, description="A tool id (tool-...)")]
PassageId = Annotated[str, Path(pattern=ID_PATTERN, description="A passage id (passage-...)")]
RunId = Annotated[str, Path(pattern=ID_PATTERN, description="A run id (run-...)")]
MessageId = Annotated[str, Path(pattern=ID_PATTERN, description="A message id (message-...)")]
ArchiveId = Annotated[str, Path(pattern=ID_PATTERN, description="An archive id (archive-...)")]
BlockLabel = Annotated[str, Path(pattern=LABEL_PATTERN, description="A block label")]
ToolName = Annotated[str, Path(pattern=TOOL_NAME_PATTERN, description="A tool name")]

# Query parameters (never null: leave one out for "none"; see _openapi).
Cursor = Annotated[str | None, Query(pattern=ID_PATTERN, description="An id from the listing")]
IdQuery = Annotated[str | None, Query(pattern=ID_PATTERN, description="An id")]
IdListQuery = Annotated[
    list[Annotated[str, StringConstraints(pattern=ID_PATTERN)]] | None,
    Query(description="Ids (the parameter repeated)"),
]
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
# The same in a body (the string is parsed by epoch_seconds, never by pydantic).
DateTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


# Parsed with an adapter built at import: route signatures avoid ``datetime``, whose module
# global a simulation's guards replace (FastAPI resolves the annotations in create_app).
_DATETIME = TypeAdapter(datetime)


def epoch_seconds(text: str | None, field: str, where: str = "query") -> float | None:
    """An ISO 8601 datetime (of the query, or the body) as epoch seconds (a time without a
    zone is UTC)."""
    if text is None:
        return None
    if not re.fullmatch(RFC3339, text):
        raise InvalidError(f"{where}.{field}", f"not an RFC 3339 date-time: {text!r}")
    try:
        moment = _DATETIME.validate_python(text)
    except ValidationError as error:
        problem = error.errors()[0]["msg"]
        raise InvalidError(f"{where}.{field}", f"{problem}: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):
        raise InvalidError(f"{where}.{field}", f"out of range: {moment.isoformat()}") from None
