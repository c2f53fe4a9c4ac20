"""The built-in tools' definitions: names, JSON schemas, types and loop roles.

Each built-in has a fixed id derived from its name (``tool-<uuid>`` from a hash), so every
server process agrees on it without coordination. Their code is in ``_executor.py``; their
pages are docs/tools/<name>.md.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from ._models import ToolSpec

__all__ = [
    "BUILTINS",
    "FILE_TOOLS",
    "MEMORY_TOOLS",
    "SEND_MESSAGE",
    "Builtin",
    "builtin_by_name",
    "builtin_id",
    "default_tool_names",
]

SEND_MESSAGE = "send_message"
_STR: dict[str, Any] = {"type": "string"}
_OPT_STR: dict[str, Any] = {"type": ["string", "null"]}
_OPT_TAGS: dict[str, Any] = {"type": ["array", "null"], "items": {"type": "string"}}
_DATE = 'ISO 8601: "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM"'


@attrs.frozen
class Builtin:
    """A built-in tool. ``category``: ``core`` (messaging), ``memory`` (edits core memory),
    ``recall`` (archival and conversation memory), ``control`` (heartbeats), ``sandbox``.
    ``terminal`` tools end a memgpt_agent's run (and get no ``request_heartbeat``)."""

    name: str
    description: str
    properties: Mapping[str, Any] = attrs.field(hash=False)
    required: tuple[str, ...]
    tool_type: str
    category: str
    terminal: bool = False

    @property
    def parameters(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {k: dict(v) for k, v in self.properties.items()},
            "required": list(self.required),
            "additionalProperties": False,
        }

    def spec(self) -> ToolSpec:
        schema = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return ToolSpec(
            id=builtin_id(self.name),
            name=self.name,
            description=self.description,
            json_schema=schema,
            tool_type=self.tool_type,
            tags=("builtin", self.category),
        )


def builtin_id(name: str) -> str:
    """The fixed id of built-in ``name``: a version-4-shaped UUID from a hash of the name."""
    digest = hashlib.blake2b(f"kelpie-builtin-tool/{name}".encode(), digest_size=16).digest()
    return f"tool-{uuid.UUID(bytes=digest, version=4)}"


def _p(kind: Any, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **extra}


_B = Builtin
BUILTINS: tuple[Builtin, ...] = (
    _B(
        SEND_MESSAGE,
        "Sends a message to the human user.",
        {
            "message": _p(
                "string", "Message contents. All unicode (including emojis) are supported."
            )
        },
        ("message",),
        "letta_core",
        "core",
        terminal=True,
    ),
    _B(
        "conversation_search",
        "Search prior conversation history (text match over every stored message).",
        {
            "query": _p("string", "Words to look for in past messages."),
            "roles": _p(
                ["array", "null"],
                "Only messages with these roles.",
                items={"type": "string", "enum": ["assistant", "user", "tool"]},
            ),
            "limit": _p(["integer", "null"], "Maximum number of results (default 5).", minimum=1),
            "start_date": {
                **_OPT_STR,
                "description": f"On or after this date (inclusive). {_DATE}",
            },
            "end_date": {**_OPT_STR, "description": f"On or before this date (inclusive). {_DATE}"},
        },
        ("query",),
        "letta_core",
        "recall",
    ),
    _B(
        "conversation_search_date",
        "Search prior conversation history by date range (inclusive), oldest first, by page.",
        {
            "start_date": _p("string", f"The start of the range. {_DATE}"),
            "end_date": _p("string", f"The end of the range (inclusive). {_DATE}"),
            "page": _p("integer", "Which page of results (0 is the first).", minimum=0),
        },
        ("start_date", "end_date"),
        "letta_core",
        "recall",
    ),
    _B(
        "archival_memory_insert",
        "Add to archival memory. Phrase the memory so that it can be easily queried later.",
        {
            "content": _p("string", "Content to write to the memory."),
            "tags": {**_OPT_TAGS, "description": "Optional tags for filtering searches."},
        },
        ("content",),
        "letta_core",
        "recall",
    ),
    _B(
        "archival_memory_search",
        "Search archival memory using semantic (embedding-based) search.",
        {
            "query": _p("string", "String to search for using semantic similarity."),
            "tags": {**_OPT_TAGS, "description": "Only passages with these tags."},
            "tag_match_mode": _p("string", "Match any or all tags.", enum=["any", "all"]),
            "top_k": _p(["integer", "null"], "Maximum number of results (default 5).", minimum=1),
            "start_datetime": {**_OPT_STR, "description": f"Created on or after. {_DATE}"},
            "end_datetime": {**_OPT_STR, "description": f"Created on or before. {_DATE}"},
        },
        ("query",),
        "letta_core",
        "recall",
    ),
    _B(
        "core_memory_append",
        "Append to the contents of core memory.",
        {
            "label": _p("string", "Section of the memory to be edited."),
            "content": _p("string", "Content to write to the memory."),
        },
        ("label", "content"),
        "letta_memory_core",
        "memory",
    ),
    _B(
        "core_memory_replace",
        "Replace the contents of core memory. To delete memories, use an empty string for "
        "new_content.",
        {
            "label": _p("string", "Section of the memory to be edited."),
            "old_content": _p("string", "String to replace. Must be an exact match."),
            "new_content": _p("string", "Content to write to the memory."),
        },
        ("label", "old_content", "new_content"),
        "letta_memory_core",
        "memory",
    ),
    _B(
        "memory_replace",
        "Replace a specific string in a memory block with a new string; the old string must "
        "occur exactly once.",
        {
            "label": _p("string", "Section of the memory to be edited, identified by its label."),
            "old_string": _p("string", "The text to replace (must match exactly, once)."),
            "new_string": _p("string", "The new text to insert in place of the old text."),
        },
        ("label", "old_string", "new_string"),
        "letta_sleeptime_core",
        "memory",
    ),
    _B(
        "memory_insert",
        "Insert text at a specific line in a memory block.",
        {
            "label": _p("string", "Section of the memory to be edited, identified by its label."),
            "new_string": _p("string", "The text to insert."),
            "insert_line": _p(
                "integer", "Insert after this line (0: at the start; -1, the default: at the end)."
            ),
        },
        ("label", "new_string"),
        "letta_sleeptime_core",
        "memory",
    ),
    _B(
        "memory_rethink",
        "Rewrite a whole memory block (created if it does not exist yet).",
        {
            "label": _p("string", "The block to rewrite (or create)."),
            "new_memory": _p("string", "The new contents of the whole block."),
        },
        ("label", "new_memory"),
        "letta_sleeptime_core",
        "memory",
    ),
    _B(
        "memory_finish_edits",
        "Call when you have finished editing memory; ends the run.",
        {},
        (),
        "letta_sleeptime_core",
        "memory",
        terminal=True,
    ),
    _B(
        "pause_heartbeats",
        "Temporarily ignore heartbeats: the loop stops after this step, and requested heartbeats "
        "are ignored until the pause ends (at most 360 minutes).",
        {"minutes": _p("integer", "Number of minutes to pause (capped at 360).", minimum=0)},
        ("minutes",),
        "letta_core",
        "control",
    ),
    _B(
        "run_code",
        "Run code in the agent's sandbox and return its output.",
        {
            "code": _p("string", "The code to run."),
            "language": _p("string", "python or shell.", enum=["python", "shell"]),
        },
        ("code", "language"),
        "letta_builtin",
        "sandbox",
    ),
    _B(
        "open_files",
        "Open one or more files and load their contents into files section in core memory. "
        "Maximum of 5 files can be opened simultaneously (the least recently used one is "
        "closed). Use it to inspect file contents, view portions of large files, or replace "
        "the open files with close_all_others=True.",
        {
            "file_requests": {
                "type": "array",
                "description": "Files to open, each with an optional view range.",
                "items": {
                    "type": "object",
                    "properties": {
                        "file_name": _p("string", "Name of the file to open (folder/file)."),
                        "offset": _p(
                            ["integer", "null"],
                            "Optional first line to show (0-indexed); default: the start.",
                        ),
                        "length": _p(
                            ["integer", "null"],
                            "Optional number of lines to show from offset; default: to the end.",
                        ),
                    },
                    "required": ["file_name"],
                    "additionalProperties": False,
                },
            },
            "close_all_others": _p(
                "boolean", "If true, close all other open files first.", default=False
            ),
        },
        ("file_requests",),
        "letta_files_core",
        "files",
    ),
    _B(
        "grep_files",
        "Search the attached files for a pattern (a regular expression, case-insensitive) and "
        "show the matching lines with context, 20 matches per call (use offset for more).",
        {
            "pattern": _p("string", "Keyword or regex pattern to search within file contents."),
            "include": _p(
                ["string", "null"], "Optional keyword or regex pattern to filter file names."
            ),
            "context_lines": _p(
                ["integer", "null"], "Lines of context before and after each match (default 1)."
            ),
            "offset": _p(["integer", "null"], "Matches to skip before showing results."),
        },
        ("pattern",),
        "letta_files_core",
        "files",
    ),
    _B(
        "semantic_search_files",
        "Search file contents by meaning rather than exact matches; returns the best matching "
        "passages with their file names.",
        {
            "query": _p("string", "The search query text to find semantically similar content."),
            "limit": _p("integer", "Maximum number of results to return (default 5).", default=5),
        },
        ("query",),
        "letta_files_core",
        "files",
    ),
)
FILE_TOOLS = ("open_files", "grep_files", "semantic_search_files")
_BY_NAME = {b.name: b for b in BUILTINS}
_BY_ID = {builtin_id(b.name): b for b in BUILTINS}
MEMORY_TOOLS = frozenset(b.name for b in BUILTINS if b.category in ("memory", "recall", "control"))
_DEFAULTS = {
    "memgpt_agent": (
        SEND_MESSAGE,
        "conversation_search",
        "archival_memory_insert",
        "archival_memory_search",
        "core_memory_append",
        "core_memory_replace",
    ),
    "letta_v1_agent": (
        "conversation_search",
        "archival_memory_insert",
        "archival_memory_search",
        "memory_replace",
        "memory_insert",
        "memory_rethink",
    ),
    "react_agent": (),
}


def builtin_by_name(name: str) -> Builtin | None:
    return _BY_NAME.get(name)


def builtin_by_id(tool_id: str) -> Builtin | None:
    return _BY_ID.get(tool_id)


def default_tool_names(agent_type: str) -> tuple[str, ...]:
    """The built-ins an agent of this type gets with ``include_base_tools``."""
    return _DEFAULTS.get(agent_type, ())
