"""Letta's agent file (``.af``, the ``v2`` multi-entity format): export and import.

An agent file is one JSON document::

    {"agents": [...], "groups": [], "blocks": [...], "files": [...], "sources": [...],
     "tools": [...], "mcp_servers": [], "skills": [], "metadata": {...}, "created_at": ...}

Entities refer to each other by file-local ids (``agent-0``, ``block-1``, ``tool-2``,
``source-0``, ``file-0``, ``message-7``). An agent carries its settings (Letta's
``CreateAgent`` fields), ``block_ids``, ``tool_ids``, ``source_ids``, ``tool_rules``, its
``messages`` in Letta's internal shape (``role`` system/user/assistant/tool/approval,
``content`` parts, ``tool_calls``, ``tool_returns``, ``approvals``) and ``files_agents``.

**Export then import is lossless** for what an agent is: its settings, blocks, tools (custom
tools with their source, schema and flags; built-ins by name), tool rules, attached folders
with their files' text and open windows, and its messages (every type, text, tool calls with
their ids, results with stdout/stderr, approvals, otids and dates). New ids are made on import;
runs and steps are not part of the format (a step's text and calls travel as one assistant
message, as in Letta, and come back as one step). Groups, skills and MCP server secrets are
not exported; an import that carries groups is refused rather than half-applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ._af_messages import (
    ImportedMessage,
    from_letta_messages,
    iso,
    rule_from_json,
    rule_json,
    to_letta_messages,
)
from ._builtins import builtin_by_id, builtin_by_name
from ._errors import InvalidRequestError
from ._messages import AgentMessage
from ._models import AgentRecord, Block, ToolSpec

__all__ = [
    "AgentFilePlan",
    "FileDef",
    "FolderDef",
    "PlannedAgent",
    "ToolDef",
    "dump_agent_file",
    "from_letta_messages",
    "parse_agent_file",
    "rule_from_json",
    "rule_json",
    "to_letta_messages",
]

FORMAT = "kelpie-agent-file-v2"


# -- the plan of an import -------------------------------------------------------------------------
@attrs.frozen
class ToolDef:
    ref: str
    name: str
    tool_type: str
    description: str = ""
    source_code: str | None = None
    json_schema: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    tags: tuple[str, ...] = ()
    return_char_limit: int | None = None
    default_requires_approval: bool = False
    mcp_server: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen
class FolderDef:
    ref: str
    name: str
    description: str | None = None
    instructions: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen
class FileDef:
    ref: str
    folder_ref: str
    file_name: str
    content: str
    file_type: str | None = None


@attrs.frozen
class PlannedAgent:
    ref: str
    settings: Mapping[str, Any] = attrs.field(hash=False)  # CreateAgent fields
    block_refs: tuple[str, ...]
    tool_refs: tuple[str, ...]
    folder_refs: tuple[str, ...]
    messages: tuple[ImportedMessage, ...]
    open_files: tuple[tuple[str, int | None, int | None], ...]  # file ref, window


@attrs.frozen
class AgentFilePlan:
    agents: tuple[PlannedAgent, ...]
    blocks: Mapping[str, Block] = attrs.field(hash=False)  # ids are file refs
    tools: Mapping[str, ToolDef] = attrs.field(hash=False)
    folders: Mapping[str, FolderDef] = attrs.field(hash=False)
    files: Mapping[str, FileDef] = attrs.field(hash=False)


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequestError(f"{key}: expected a list")
    return value


def _ref(item: Mapping[str, Any], where: str) -> str:
    ref = item.get("id")
    if not isinstance(ref, str) or not ref:
        raise InvalidRequestError(f"{where}.id: every entity needs an id")
    return ref


def parse_agent_file(raw: bytes | str | Mapping[str, Any]) -> AgentFilePlan:
    """Read and check an agent file; every mistake is a one-line InvalidRequestError naming
    the field (``agents[0].messages[3].role: ...``)."""
    if isinstance(raw, bytes | str):
        try:
            data = json.loads(raw)
        except ValueError as error:
            raise InvalidRequestError(f"file: not JSON ({error})") from None
    else:
        data = raw
    if not isinstance(data, Mapping) or "agents" not in data:
        raise InvalidRequestError(
            "file: not a v2 agent file (no 'agents'); the legacy v1 format is not supported"
        )
    if _list(data, "groups"):
        raise InvalidRequestError("groups: multi-agent groups are not supported")
    blocks: dict[str, Block] = {}
    for i, b in enumerate(_list(data, "blocks")):
        where = f"blocks[{i}]"
        if not isinstance(b, Mapping):
            raise InvalidRequestError(f"{where}: expected an object")
        ref = _ref(b, where)
        try:
            blocks[ref] = Block(
                id=ref,
                label=b.get("label"),  # type: ignore[arg-type]
                value=b.get("value") or "",
                limit=b.get("limit") or 20_000,
                description=b.get("description") or "",
                read_only=bool(b.get("read_only")),
                metadata=b.get("metadata") or {},
            )
        except (InvalidRequestError, TypeError) as error:
            raise InvalidRequestError(f"{where}: {error}") from None
    tools: dict[str, ToolDef] = {}
    for i, t in enumerate(_list(data, "tools")):
        where = f"tools[{i}]"
        if not isinstance(t, Mapping) or not isinstance(t.get("name"), str):
            raise InvalidRequestError(f"{where}: a tool needs a name")
        ref = _ref(t, where)
        meta = t.get("metadata_") or t.get("metadata") or {}
        tools[ref] = ToolDef(
            ref=ref,
            name=t["name"],
            tool_type=str(t.get("tool_type") or "custom"),
            description=str(t.get("description") or ""),
            source_code=t.get("source_code"),
            json_schema=t.get("json_schema"),
            tags=tuple(t.get("tags") or ()),
            return_char_limit=t.get("return_char_limit"),
            default_requires_approval=bool(t.get("default_requires_approval")),
            mcp_server=meta.get("mcp_server") if isinstance(meta, Mapping) else None,
            metadata=dict(meta) if isinstance(meta, Mapping) else {},
        )
    folders: dict[str, FolderDef] = {}
    for i, s in enumerate(_list(data, "sources")):
        where = f"sources[{i}]"
        if not isinstance(s, Mapping) or not isinstance(s.get("name"), str):
            raise InvalidRequestError(f"{where}: a source needs a name")
        ref = _ref(s, where)
        folders[ref] = FolderDef(
            ref, s["name"], s.get("description"), s.get("instructions"), s.get("metadata") or {}
        )
    files: dict[str, FileDef] = {}
    for i, f in enumerate(_list(data, "files")):
        where = f"files[{i}]"
        if not isinstance(f, Mapping) or f.get("source_id") not in folders:
            raise InvalidRequestError(f"{where}.source_id: must name one of the file's sources")
        ref = _ref(f, where)
        files[ref] = FileDef(
            ref,
            f["source_id"],
            str(f.get("file_name") or f.get("original_file_name") or ref),
            str(f.get("content") or ""),
            f.get("file_type"),
        )
    agents = tuple(
        _agent(a, f"agents[{i}]", blocks, tools, folders, files)
        for i, a in enumerate(_list(data, "agents"))
    )
    if not agents:
        raise InvalidRequestError("agents: the file has no agent")
    return AgentFilePlan(agents, blocks, tools, folders, files)


def _refs(value: object, known: Mapping[str, Any], where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: expected a list of ids")
    for ref in value:
        if ref not in known:
            raise InvalidRequestError(f"{where}: {ref!r} is not in the file")
    return tuple(value)


def _agent(
    a: object,
    where: str,
    blocks: Mapping[str, Block],
    tools: Mapping[str, ToolDef],
    folders: Mapping[str, FolderDef],
    files: Mapping[str, FileDef],
) -> PlannedAgent:
    if not isinstance(a, Mapping):
        raise InvalidRequestError(f"{where}: expected an object")
    ref = _ref(a, where)
    given = a.get("llm_config")
    llm: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    agent_type = a.get("agent_type") or "letta_v1_agent"
    model = (
        a.get("model")
        or llm.get("handle")
        or (f"anthropic/{llm['model']}" if llm.get("model") else None)
    )
    settings: dict[str, Any] = {
        "name": a.get("name") or ref,
        "agent_type": agent_type,
        "system": a.get("system") or "",
        "description": a.get("description") or "",
        "tags": tuple(a.get("tags") or ()),
        "metadata": a.get("metadata") or {},
        "timezone": a.get("timezone") or "UTC",
        "tool_rules": tuple(
            rule_from_json(r, f"{where}.tool_rules[{j}]")
            for j, r in enumerate(a.get("tool_rules") or [])
        ),
    }
    if model:
        settings["model"] = model
    window = a.get("context_window_limit") or llm.get("context_window")
    if window:
        settings["context_window"] = window
    tokens = a.get("max_tokens") or llm.get("max_tokens")
    if tokens:
        settings["max_tokens"] = tokens
    for key in ("max_files_open", "per_file_view_window_char_limit"):
        if a.get(key):
            settings[key] = a[key]
    source_refs = a.get("source_ids") or a.get("folder_ids")
    open_files = []
    for j, fa in enumerate(a.get("files_agents") or []):
        if isinstance(fa, Mapping) and fa.get("file_id") in files and fa.get("is_open"):
            start = fa.get("start_line")
            end = fa.get("end_line")
            open_files.append((fa["file_id"], start - 1 if start else None, end or None))
        elif not isinstance(fa, Mapping):
            raise InvalidRequestError(f"{where}.files_agents[{j}]: expected an object")
    return PlannedAgent(
        ref=ref,
        settings=settings,
        block_refs=_refs(a.get("block_ids"), blocks, f"{where}.block_ids"),
        tool_refs=_refs(a.get("tool_ids"), tools, f"{where}.tool_ids"),
        folder_refs=_refs(source_refs, folders, f"{where}.source_ids"),
        messages=tuple(
            from_letta_messages(a.get("messages") or [], agent_type, f"{where}.messages")
        ),
        open_files=tuple(open_files),
    )


# -- export ----------------------------------------------------------------------------------------
def tool_json(spec: ToolSpec, ref: str) -> dict[str, Any]:
    builtin = builtin_by_id(spec.id) or (
        builtin_by_name(spec.name) if spec.tool_type != "custom" else None
    )
    return {
        "id": ref,
        "tool_type": spec.tool_type,
        "description": spec.description,
        "source_type": "python" if spec.source_code else None,
        "name": spec.name,
        "tags": list(spec.tags),
        "source_code": None if builtin is not None else spec.source_code,
        "json_schema": dict(spec.json_schema),
        "args_json_schema": None,
        "return_char_limit": spec.return_char_limit,
        "pip_requirements": None,
        "npm_requirements": None,
        "default_requires_approval": spec.default_requires_approval,
        "enable_parallel_execution": False,
        "metadata_": dict(spec.metadata),
    }


def dump_agent_file(
    agent: AgentRecord,
    blocks: Iterable[Block],
    tools: Iterable[ToolSpec],
    messages: Sequence[AgentMessage],
    folders: Sequence[Any],
    files: Sequence[tuple[Any, str]],
    open_files: Sequence[Any],
    *,
    now: float,
) -> dict[str, Any]:
    """The agent file of one agent (``folders``: Folder records; ``files``: (FileRecord, its
    text); ``open_files``: FileState of the open ones)."""
    block_refs = {b.id: f"block-{i}" for i, b in enumerate(blocks)}
    block_list = list(blocks)
    tool_list = list(tools)
    tool_refs = {t.id: f"tool-{i}" for i, t in enumerate(tool_list)}
    folder_refs = {f.id: f"source-{i}" for i, f in enumerate(folders)}
    file_refs = {r.id: f"file-{i}" for i, (r, _) in enumerate(files)}
    letta = to_letta_messages(messages, "agent-0")
    agent_json: dict[str, Any] = {
        "id": "agent-0",
        "name": agent.name,
        "agent_type": agent.agent_type,
        "system": agent.system,
        "description": agent.description or None,
        "tags": list(agent.tags),
        "metadata": dict(agent.metadata) or None,
        "timezone": agent.timezone,
        "model": agent.model,
        "llm_config": {
            "model": agent.llm_model,
            "model_endpoint_type": "anthropic",
            "context_window": agent.context_window,
            "handle": agent.model,
            "max_tokens": agent.max_tokens,
        },
        "embedding": agent.embedding,
        "context_window_limit": agent.context_window,
        "max_tokens": agent.max_tokens,
        "tool_rules": [rule_json(r) for r in agent.tool_rules],
        "memory_blocks": [],
        "tools": [],
        "block_ids": [block_refs[b.id] for b in block_list],
        "tool_ids": [tool_refs[t.id] for t in tool_list],
        "source_ids": [folder_refs[f] for f in agent.folder_ids if f in folder_refs],
        "folder_ids": None,
        "identity_ids": None,
        "include_base_tools": False,
        "max_files_open": agent.max_files_open,
        "per_file_view_window_char_limit": agent.per_file_view_window_char_limit,
        "in_context_message_ids": [m["id"] for m in letta],
        "messages": letta,
        "files_agents": [
            {
                "id": f"file_agent-{i}",
                "agent_id": "agent-0",
                "file_id": file_refs[s.file_id],
                "source_id": folder_refs.get(s.folder_id),
                "is_open": True,
                "start_line": s.start_line + 1 if s.start_line is not None else None,
                "end_line": s.end_line,
            }
            for i, s in enumerate(open_files)
            if s.file_id in file_refs
        ],
        "group_ids": [],
    }
    return {
        "agents": [agent_json],
        "groups": [],
        "blocks": [
            {
                "id": block_refs[b.id],
                "label": b.label,
                "value": b.value,
                "limit": b.limit,
                "description": b.description,
                "read_only": b.read_only,
                "metadata": dict(b.metadata),
            }
            for b in block_list
        ],
        "files": [
            {
                "id": file_refs[r.id],
                "source_id": folder_refs[r.folder_id],
                "file_name": r.file_name,
                "original_file_name": r.original_file_name,
                "file_type": r.file_type,
                "file_size": r.file_size,
                "processing_status": r.processing_status,
                "total_chunks": r.total_chunks,
                "chunks_embedded": r.chunks_embedded,
                "content": text,
            }
            for r, text in files
        ],
        "sources": [
            {
                "id": folder_refs[f.id],
                "name": f.name,
                "description": f.description,
                "instructions": f.instructions,
                "metadata": dict(f.metadata),
            }
            for f in folders
        ],
        "tools": [tool_json(t, tool_refs[t.id]) for t in tool_list],
        "mcp_servers": [],
        "skills": [],
        "metadata": {"revision_id": FORMAT},
        "created_at": iso(now),
    }
