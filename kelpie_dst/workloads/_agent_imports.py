"""Agent-file import options and a react agent's tools, through the real SDK (``imports``).

With ``imports`` on, once the agents' clients are done (the faults go on), one more client, on
random nodes, hopping after failures, drives what no other walker sends and logs what it read
for :func:`check_imports` (``imports_contract``):

1. **A source**: a custom tool ``imp_probe`` (its first source) and an agent ``imports-src``
   with it, a ``max_files_open`` and a ``per_file_view_window_char_limit`` drawn from the rng
   (never the defaults).
2. **A document**: the source's export, the tool's source replaced by a second version and
   six messages added to the history (as a client writing a file by hand would).
3. **Imports, each option as documented** (docs/http-api.md, Letta's ``agents.import_file``):
   ``override_existing_tools=false, strip_messages=true, model=M`` without a name (the copy is
   named ``imports-src_copy``: Letta's ``_copy`` suffix); the tool must keep its first source,
   the copy must have none of the file's messages and the model ``M``. Then ``name=imports-over``
   with the defaults: the tool now has the file's source, the copy has the file's messages in
   order. Then ``append_copy_suffix=false`` of the document renamed ``imports-plain``: the copy is
   named exactly that. Every copy keeps the source's file limits and is given the existing tool
   (matched by name), not a new one. The second copy exported with ``scrub_messages`` carries no
   message.
4. **A react agent has no memory tools** (docs/agent.md, "Per agent type"): attaching
   ``conversation_search`` or ``archival_memory_insert`` to a ``react_agent`` is refused (4xx), and
   its tool list never shows them.
5. **Base tools per type**: an agent of each type made with ``include_base_tools`` has exactly
   its type's documented tools (docs/agent.md, "Per agent type").

Every create is retry-safe (looked up by name before a retry). An import whose answer the client
never got (found by name after a cut attempt) is judged on what the create commits only.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import letta_client

from ._agent_catalog import add_history
from ._agent_readback import _items
from ._agent_walker import SdkWalker

__all__ = ["ImportsLog", "ImportsWalker", "check_imports"]

SOURCE = "imports-src"
SUFFIXED = f"{SOURCE}_copy"  # Letta's copy suffix (append_copy_suffix, no name)
OVER = "imports-over"
PLAIN = "imports-plain"
REACT = "imports-react"
TOOL = "imp_probe"
MODELS = ("anthropic/claude-haiku-4-5", "anthropic/claude-opus-4-1")
FILES_OPEN = (1, 2, 3, 7, 9)  # never the default 5
WINDOWS = (1_000, 2_500, 7_777, 12_000)  # never the default 50,000
MEMORY_TOOLS = ("conversation_search", "archival_memory_insert")
BASE_TOOLS = {  # docs/agent.md, "Per agent type": what include_base_tools gives each type
    "memgpt_agent": (
        "send_message",
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
HISTORY = (
    ("user", "the cormorant dried its wings on the jetty"),
    ("assistant", "a jetty is a fine place for a cormorant"),
    ("user", "the tern dived twice near the buoy"),
    ("assistant", "terns dive when the sprats rise"),
    ("user", "a gannet folded into the swell"),
    ("assistant", "gannets fold at the last moment"),
)


def _source(version: int) -> str:
    return f'''def {TOOL}(note: str) -> str:
    """Probe agent-file imports, version {version}.

    Args:
        note: what to note

    Returns:
        str: the note
    """
    return note + " v{version}"
'''


@attrs.define
class Copy:
    """One import as the client asked for it and what it then read."""

    what: str
    name: str  # the name the copy must have
    model: str | None  # the model handle it must have
    history: bool  # whether it must hold the file's messages (False: none of them)
    sure: bool = True  # the import answered (not only found by name after a cut attempt)
    seen: dict[str, Any] = attrs.field(factory=dict)  # name, model, limits, tool ids
    texts: list[str] = attrs.field(factory=list)  # its history's texts, oldest first


@attrs.define
class ImportsLog:
    source: dict[str, Any] = attrs.field(factory=dict)  # as made: limits, model, tool id
    copies: list[Copy] = attrs.field(factory=list)
    tool_sources: list[tuple[str, str, str]] = attrs.field(factory=list)  # when, want, got
    scrubbed: list[tuple[str, int]] = attrs.field(factory=list)  # an export, its message count
    react: list[tuple[str, str]] = attrs.field(factory=list)  # what, what happened
    react_tools: list[tuple[str, list[str]]] = attrs.field(factory=list)  # when, tool names
    base_tools: list[tuple[str, list[str]]] = attrs.field(factory=list)  # agent type, names
    problems: list[str] = attrs.field(factory=list)


def check_imports(log: ImportsLog) -> list[str]:
    """Every import did what its options say; a react agent got no memory tool."""
    out = list(log.problems)
    src = log.source
    for copy in log.copies:
        seen = copy.seen
        if not seen:
            continue
        if seen.get("name") != copy.name:
            out.append(f"{copy.what}: named {seen.get('name')!r}, want {copy.name!r}")
        if copy.model is not None and seen.get("model") != copy.model:
            out.append(f"{copy.what}: model {seen.get('model')!r}, want {copy.model!r}")
        for key in ("max_files_open", "per_file_view_window_char_limit"):
            if key in src and seen.get(key) != src[key]:
                out.append(f"{copy.what}: {key} {seen.get(key)!r}, the source's {src[key]!r}")
        tools = seen.get("tools") or {}
        if "tool" in src and tools.get(TOOL) != src["tool"]:
            out.append(
                f"{copy.what}: its {TOOL} is {tools.get(TOOL)!r}, not the existing tool "
                f"{src['tool']!r} (tools are matched by name)"
            )
        if not copy.sure:
            continue
        wanted = [text for _, text in HISTORY]
        held = [t for t in copy.texts if t in wanted]
        if copy.history and held != wanted:
            out.append(f"{copy.what}: the file's messages read {held}, want {wanted}")
        if not copy.history and held:
            out.append(f"{copy.what} (strip_messages): it holds the file's messages {held}")
    for when, want, got in log.tool_sources:
        if got != want:
            out.append(f"{when}: {TOOL}'s source is {got!r}, want {want!r}")
    for what, count in log.scrubbed:
        if count:
            out.append(f"{what}: {count} messages in an export with scrub_messages")
    for what, happened in log.react:
        if happened != "refused":
            out.append(f"{what}: {happened} (a react_agent has no memory tools)")
    for when, names in log.react_tools:
        shown = sorted(set(names) & set(MEMORY_TOOLS))
        if shown:
            out.append(f"{when}: the react agent's tools list {shown}")
    for agent_type, names in log.base_tools:
        documented = sorted(BASE_TOOLS[agent_type])
        if sorted(names) != documented:
            out.append(
                f"a {agent_type} made with its base tools has {sorted(names)}, want {documented}"
            )
    return out


def _texts(page: Any) -> list[str]:
    out = []
    for m in _items(page):
        content = getattr(m, "content", None)
        if isinstance(content, str):
            out.append(content)
    return out


class ImportsWalker(SdkWalker):
    """Imports with every option, a react agent's tools (see the module docstring)."""

    PREFIX = "imports"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = ImportsLog()
        self.problems = self.log.problems
        self.source = ""
        self.tool = ""
        self.document: dict[str, Any] = {}

    async def run(self) -> None:
        await self._phases(
            (self._make_source, self._imports, self._react, self._base_tools),
            lambda phase: phase != self._imports or bool(self.source and self.tool),
        )

    async def _agent(self, name: str, **fields: Any) -> str:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=name, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(name=name, include_base_tools=False, **fields)

        made = await self._create(f"agent {name}", find, make)
        return str(made.id)

    # -- 1. the source, 2. the document ------------------------------------------------------
    async def _make_source(self) -> None:
        tool = await self._sdk("tools.upsert", source_code=_source(1))
        self.tool = str(tool.id)
        files_open = int(self.rng.choice(FILES_OPEN))
        window = int(self.rng.choice(WINDOWS))
        self.source = await self._agent(
            SOURCE,
            memory_blocks=[{"label": "human", "value": "a shore watcher", "limit": 500}],
            tool_ids=[self.tool],
        )
        state = await self._sdk("agents.retrieve", self.source)
        self.log.source = {
            "max_files_open": files_open,
            "per_file_view_window_char_limit": window,
            "model": _model(state),
            "tool": self.tool,
        }

    def _written(self, exported: Any) -> dict[str, Any]:
        document = _json(exported)
        [agent] = document["agents"]
        # the file limits travel in agent files only (the HTTP API does not take them)
        for key in ("max_files_open", "per_file_view_window_char_limit"):
            agent[key] = self.log.source[key]
        for tool in document.get("tools") or ():
            if tool.get("name") == TOOL:
                tool["source_code"] = _source(2)
        add_history(agent, HISTORY, "message-i")
        return document

    # -- 3. the imports ------------------------------------------------------------------------
    async def _imports(self) -> None:
        self.document = self._written(await self._sdk("agents.export_file", self.source))
        raw = json.dumps(self.document).encode()
        model = str(self.rng.choice([m for m in MODELS if m != self.log.source.get("model")]))
        stripped = Copy(
            "import (no name, no override, strip_messages, model)", SUFFIXED, model, False
        )
        await self._import(
            stripped,
            raw,
            override_existing_tools=False,
            strip_messages=True,
            model=model,
        )
        await self._tool_source("after the import without override_existing_tools", 1)
        over = Copy(f"import as {OVER} (the defaults)", OVER, self.log.source.get("model"), True)
        await self._import(over, raw, name=OVER)
        await self._tool_source(f"after the import as {OVER} (override_existing_tools)", 2)
        plain_doc = json.loads(raw)
        plain_doc["agents"][0]["name"] = PLAIN
        plain = Copy(f"import of {PLAIN} (append_copy_suffix false)", PLAIN, None, True)
        await self._import(plain, json.dumps(plain_doc).encode(), append_copy_suffix=False)
        for copy in self.log.copies:
            agent_id = copy.seen.pop("id", None)
            if agent_id is None:
                continue
            state = await self._sdk("agents.retrieve", agent_id)
            copy.seen.update(_shape(state))
            page = await self._sdk("agents.messages.list", agent_id, order="asc", limit=1000)
            copy.texts = _texts(page)
            exported = _json(await self._sdk("agents.export_file", agent_id))
            [agent] = exported.get("agents") or [{}]
            for key in ("max_files_open", "per_file_view_window_char_limit"):
                copy.seen[key] = agent.get(key)
            if copy is over and copy.sure:
                scrubbed = _json(
                    await self._sdk("agents.export_file", agent_id, scrub_messages=True)
                )
                count = sum(len(a.get("messages") or ()) for a in scrubbed.get("agents") or ())
                self.log.scrubbed.append((f"export of {OVER} with scrub_messages", count))

    async def _import(self, copy: Copy, raw: bytes, **options: Any) -> None:
        self.log.copies.append(copy)

        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=copy.name, limit=1, order="asc")
            return page.items[0].id if page.items else None

        answered: list[str] = []

        async def make(sdk: Any) -> Any:
            got = await sdk.agents.import_file(file=("imports.af", raw), **options)
            answered.append("yes")
            return got.agent_ids[0] if got.agent_ids else None

        made = await self._create(copy.what, find, make)
        if made is None:
            self.problems.append(f"{copy.what}: answered no agent id")
            return
        copy.sure = bool(answered)
        copy.seen["id"] = str(made)

    async def _tool_source(self, when: str, version: int) -> None:
        tool = await self._sdk("tools.retrieve", self.tool)
        self.log.tool_sources.append((when, _source(version), str(tool.source_code)))

    # -- 4. a react agent ----------------------------------------------------------------------
    async def _react(self) -> None:
        react = await self._agent(
            REACT,
            agent_type="react_agent",
            memory_blocks=[{"label": "human", "value": "a reactive watcher", "limit": 500}],
        )
        for name in MEMORY_TOOLS:
            page = await self._sdk("tools.list", name=name, limit=10)
            found = [t for t in _items(page) if t.name == name]
            if not found:
                self.problems.append(f"tools.list(name={name!r}) does not list the built-in")
                continue
            tool_id = str(found[0].id)

            async def attach(sdk: Any, _: int, tool_id: str = tool_id) -> str:
                try:
                    await sdk.agents.tools.attach(tool_id, agent_id=react)
                except letta_client.APIStatusError as error:
                    if 400 <= error.status_code < 500:
                        return "refused"
                    raise
                return "attached"

            happened = await self._call(f"agents.tools.attach {name} to {REACT}", attach)
            self.log.react.append((f"attaching {name} to a react_agent", happened))
        tools = await self._sdk("agents.tools.list", react, limit=1000)
        self.log.react_tools.append((f"{REACT} at the end", [str(t.name) for t in _items(tools)]))

    async def _base_tools(self) -> None:
        """An agent of each type made with include_base_tools has its type's documented set."""
        for agent_type in BASE_TOOLS:
            name = f"imports-base-{agent_type}"

            async def find(sdk: Any, name: str = name) -> Any:
                page = await sdk.agents.list(name=name, limit=1, order="asc")
                return page.items[0] if page.items else None

            async def make(sdk: Any, name: str = name, agent_type: str = agent_type) -> Any:
                return await sdk.agents.create(
                    name=name,
                    agent_type=agent_type,
                    include_base_tools=True,
                    memory_blocks=[{"label": "human", "value": "a base watcher", "limit": 500}],
                )

            made = await self._create(f"agent {name}", find, make)
            tools = await self._sdk("agents.tools.list", str(made.id), limit=1000)
            self.log.base_tools.append((agent_type, [str(t.name) for t in _items(tools)]))


def _json(exported: Any) -> dict[str, Any]:
    loaded = json.loads(exported if isinstance(exported, str | bytes) else json.dumps(exported))
    return dict(loaded)


def _model(state: Any) -> str | None:
    llm = state.llm_config
    handle = (llm.handle if llm is not None else None) or state.model
    return None if handle is None else str(handle)


def _shape(state: Any) -> dict[str, Any]:
    return {
        "name": state.name,
        "model": _model(state),
        "tools": {str(t.name): str(t.id) for t in state.tools or ()},
    }
