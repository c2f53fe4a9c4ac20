"""An agent's files: the folders it has attached, which of their files are open, and how open
files appear in its context (Letta's ``<directories>`` section and file blocks).

The agent's actor writes all of it, each change in one fenced transaction:

========================================  ========================================================
``agent/<id>``                             ``folder_ids`` (attachment order)
``folderagent/<folder>/<agent>``           the link a folder lists its agents from
``fileagent/<agent>/<file>``               :class:`FileState`: open or closed, the line window,
                                           when the agent last looked at it (LRU)
========================================  ========================================================

A file of an attached folder with no state is closed. Opening a file when ``max_files_open``
files are open closes the least recently used one (Letta's LRU). Attaching a folder opens its
processed files (up to the limit) and adds the file tools (``open_files``, ``grep_files``,
``semantic_search_files``); detaching the last folder removes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from kelpie_agent.storage import Transaction

from ._builtins import FILE_TOOLS, builtin_id
from ._codec import pack, register, unpack
from ._documents import window
from ._errors import InvalidRequestError, ResourceNotFoundError
from ._folders import FileRecord, Folder, file_text, folder_files, link_key, load_file, load_folder
from ._runtime import AgentRuntime

__all__ = [
    "AgentFile",
    "FileState",
    "attach_folder",
    "close_files",
    "detach_folder",
    "directories",
    "list_agent_files",
    "load_agent_files",
    "open_file",
    "open_writes",
]


@attrs.frozen
class FileState:
    """One agent's view of one file."""

    file_id: str
    folder_id: str
    is_open: bool = False
    start_line: int | None = None  # 0-based first line shown (None: the start)
    end_line: int | None = None  # 0-based, exclusive (None: the end)
    last_accessed_at: float = 0.0


register("file_state", FileState)


def state_key(agent_id: str, file_id: str) -> bytes:
    return f"fileagent/{agent_id}/{file_id}".encode()


def state_prefix(agent_id: str) -> bytes:
    return f"fileagent/{agent_id}/".encode()


@attrs.frozen
class AgentFile:
    """A file as the agent sees it: its folder, record, state, and text once loaded."""

    folder: Folder
    record: FileRecord
    state: FileState
    text: str | None = None

    @property
    def name(self) -> str:
        """Letta's label: ``<folder name>/<file name>``."""
        return f"{self.folder.name}/{self.record.file_name}"

    def visible(self, limit: int) -> str:
        """The open window's numbered lines, cut at the per-file character limit."""
        if not self.state.is_open or not self.text:
            return ""
        shown, _ = window(self.name, self.text, self.state.start_line, self.state.end_line)
        return shown[:limit]


async def load_agent_files(rt: AgentRuntime, *, texts: bool = False) -> list[AgentFile]:
    """Every file of the agent's attached folders (attachment order, then upload order), with
    its state; with ``texts``, the text of the open ones (of all, for ``grep``: ``"all"``)."""
    agent = rt.require()
    kv = rt.ctx.kv
    rows = await rt.scan_all(state_prefix(agent.id), "the agent's files")
    states: dict[str, FileState] = {}
    for _, value in rows:
        state: FileState = unpack(value)
        states[state.file_id] = state
    out: list[AgentFile] = []
    for folder_id in agent.folder_ids:
        folder = await rt.read(lambda f=folder_id: load_folder(kv, f), f"folder {folder_id}")  # type: ignore[misc]
        if folder is None:
            continue
        records = await rt.read(lambda f=folder_id: folder_files(kv, f), "the folder's files")  # type: ignore[misc]
        for record in records:
            state = states.get(record.id, FileState(record.id, folder_id))
            text = None
            if texts and state.is_open and record.processing_status == "completed":
                text = await rt.read(lambda r=record: file_text(kv, r), f"file {record.id}")  # type: ignore[misc]
            out.append(AgentFile(folder, record, state, text))
    return out


async def with_text(rt: AgentRuntime, file: AgentFile) -> AgentFile:
    if file.text is not None:
        return file
    text = await rt.read(lambda: file_text(rt.ctx.kv, file.record), f"file {file.record.id}")
    return attrs.evolve(file, text=text)


def directories(rt: AgentRuntime, files: list[AgentFile]) -> str | None:
    """Letta's ``<directories>`` section for the system prompt (``None``: no folders)."""
    agent = rt.require()
    if not agent.folder_ids:
        return None
    limit = agent.per_file_view_window_char_limit
    open_now = sum(1 for f in files if f.state.is_open)
    parts = [
        "<directories>",
        "<file_limits>",
        f"- current_files_open={open_now}",
        f"- max_files_open={agent.max_files_open}",
        "</file_limits>",
    ]
    folders: dict[str, Folder] = {}
    for f in files:
        folders.setdefault(f.folder.id, f.folder)
    for folder_id in agent.folder_ids:
        folder = folders.get(folder_id)
        if folder is None:
            continue
        parts.append(f'<directory name="{folder.name}">')
        if folder.description:
            parts.append(f"<description>{folder.description}</description>")
        if folder.instructions:
            parts.append(f"<instructions>{folder.instructions}</instructions>")
        for f in files:
            if f.folder.id != folder_id:
                continue
            value = f.visible(limit)
            status = "open" if value else "closed"
            parts += [
                f'<file status="{status}" name="{f.name}">',
                "<metadata>",
                "- read_only=true",
                f"- chars_current={len(value)}",
                f"- chars_limit={limit}",
                "</metadata>",
            ]
            if value:
                parts += ["<value>", value, "</value>"]
            parts.append("</file>")
        parts.append("</directory>")
    parts.append("</directories>")
    return "\n".join(parts)


def open_writes(
    rt: AgentRuntime,
    files: list[AgentFile],
    target: AgentFile,
    start: int | None,
    end: int | None,
) -> tuple[list[tuple[bytes, bytes]], list[str], list[FileState]]:
    """Open ``target`` with a window: the state writes, the names of the files closed to make
    room (least recently used first), and the new states."""
    agent = rt.require()
    now = rt.now()
    opened = attrs.evolve(
        target.state, is_open=True, start_line=start, end_line=end, last_accessed_at=now
    )
    others = sorted(
        (f for f in files if f.state.is_open and f.record.id != target.record.id),
        key=lambda f: (f.state.last_accessed_at, f.record.id),
    )
    closed: list[FileState] = []
    names: list[str] = []
    while len(others) + 1 > agent.max_files_open and others:
        victim = others.pop(0)
        closed.append(attrs.evolve(victim.state, is_open=False))
        names.append(victim.name)
    states = [opened, *closed]
    return [(state_key(agent.id, s.file_id), pack(s)) for s in states], names, states


async def _commit_states(rt: AgentRuntime, writes: Iterable[tuple[bytes, bytes | None]]) -> None:
    pending = list(writes)

    async def build(txn: Transaction) -> None:
        for key, value in pending:
            if value is None:
                await txn.delete(key)
            else:
                await txn.set(key, value)

    await rt.commit(build, "the agent's files")


def _find(files: list[AgentFile], file_id: str) -> AgentFile:
    for f in files:
        if f.record.id == file_id:
            return f
    raise ResourceNotFoundError("file", file_id, f"file {file_id!r} is not attached to this agent")


async def open_file(
    rt: AgentRuntime, file_id: str, start: int | None = None, end: int | None = None
) -> list[str]:
    """Open a file (``agents.files.open``: whole) -> the names of files closed to make room."""
    files = await load_agent_files(rt)
    target = _find(files, file_id)
    writes, closed, _ = open_writes(rt, files, target, start, end)
    await _commit_states(rt, writes)
    return closed


async def close_files(rt: AgentRuntime, file_id: str | None) -> list[str]:
    """Close one file, or every open file (``None``) -> the names closed."""
    files = await load_agent_files(rt)
    chosen = [_find(files, file_id)] if file_id is not None else files
    targets = [f for f in chosen if f.state.is_open]
    agent = rt.require()
    writes: list[tuple[bytes, bytes | None]] = [
        (state_key(agent.id, f.record.id), pack(attrs.evolve(f.state, is_open=False)))
        for f in targets
    ]
    if writes:
        await _commit_states(rt, writes)
    return [f.name for f in targets]


async def list_agent_files(rt: AgentRuntime) -> list[AgentFile]:
    """Every attached file with its state and the text of the open ones."""
    return await load_agent_files(rt, texts=True)


async def attach_folder(rt: AgentRuntime, folder_id: str) -> None:
    """Attach a folder: its link, the file tools, and its processed files opened (LRU)."""
    agent = rt.require()
    if folder_id in agent.folder_ids:
        return
    kv = rt.ctx.kv
    folder = await rt.read(lambda: load_folder(kv, folder_id), f"folder {folder_id}")
    if folder is None:
        raise ResourceNotFoundError("folder", folder_id)
    records = await rt.read(lambda: folder_files(kv, folder_id), "the folder's files")
    tool_ids = list(agent.tool_ids)
    for name in FILE_TOOLS:
        if builtin_id(name) not in tool_ids:
            tool_ids.append(builtin_id(name))
    new = attrs.evolve(
        agent,
        folder_ids=(*agent.folder_ids, folder_id),
        tool_ids=tuple(tool_ids),
        updated_at=rt.now(),
    )
    files = await load_agent_files(rt)
    writes: list[tuple[bytes, bytes | None]] = []
    rt.agent = new  # for the LRU below (restored if the commit fails)
    try:
        current = [*files]
        for record in records:
            if record.processing_status != "completed":
                continue
            target = AgentFile(folder, record, FileState(record.id, folder_id))
            state_writes, _, states = open_writes(rt, current, target, None, None)
            writes += state_writes
            changed = {s.file_id: s for s in states}
            current = [attrs.evolve(f, state=changed.get(f.record.id, f.state)) for f in current]
            current.append(attrs.evolve(target, state=changed[record.id]))
    finally:
        rt.agent = agent
    writes += [(rt.keys.agent, pack(new)), (link_key(folder_id, agent.id), b"")]
    await _commit_states(rt, _dedup(writes))
    rt.agent = new


def _dedup(writes: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    last: dict[bytes, bytes | None] = {}
    for key, value in writes:
        last[key] = value
    return list(last.items())


async def detach_folder(rt: AgentRuntime, folder_id: str) -> None:
    agent = rt.require()
    if folder_id not in agent.folder_ids:
        raise ResourceNotFoundError(
            "folder", folder_id, f"folder {folder_id!r} is not attached to agent {agent.id}"
        )
    remaining = tuple(f for f in agent.folder_ids if f != folder_id)
    tool_ids = agent.tool_ids
    if not remaining:
        drop = {builtin_id(n) for n in FILE_TOOLS}
        tool_ids = tuple(t for t in tool_ids if t not in drop)
    new = attrs.evolve(agent, folder_ids=remaining, tool_ids=tool_ids, updated_at=rt.now())
    rows = await rt.scan_all(state_prefix(agent.id), "the agent's files")
    writes: list[tuple[bytes, bytes | None]] = [
        (key, None) for key, value in rows if unpack(value).folder_id == folder_id
    ]
    writes += [(rt.keys.agent, pack(new)), (link_key(folder_id, agent.id), None)]
    await _commit_states(rt, writes)
    rt.agent = new


async def forget_files(rt: AgentRuntime) -> list[tuple[bytes, bytes | None]]:
    """The deletes of everything file-related an agent wrote (it is being deleted)."""
    agent = rt.require()
    rows = await rt.scan_all(state_prefix(agent.id), "the agent's files")
    writes: list[tuple[bytes, bytes | None]] = [(key, None) for key, _ in rows]
    writes += [(link_key(f, agent.id), None) for f in agent.folder_ids]
    return writes


def require_file(value: Any) -> FileRecord:
    if not isinstance(value, FileRecord):
        raise InvalidRequestError(f"not a file: {value!r}")
    return value


async def file_record(rt: AgentRuntime, file_id: str) -> FileRecord | None:
    return await rt.read(lambda: load_file(rt.ctx.kv, file_id), f"file {file_id}")
