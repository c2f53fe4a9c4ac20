"""AgentService: the typed API the HTTP layer (and tests, and scenarios) call.

One instance per node, over that node's :class:`~kelpie_agent.actors.Dispatcher` (with
:class:`ServiceAgentActor` as the ``agent`` kind) and KV. Changes and anything that needs the
agent's machinery (the loop, the archive's embeddings, tools) go to the agent's actor; pure
reads of agent state (``get_agent``, ``list_agents``, an agent's blocks and tools) are read
from the KV, so they never activate an actor or move one between nodes. Standalone blocks and
tools are in ``_catalog``, messages in ``_messaging``. Every method validates its arguments
first and fails with a :class:`ServiceError` (docs/service.md has the table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.agent import (
    AgentView,
    AttachBlock,
    AttachTool,
    Block,
    CreateAgent,
    DeleteAgent,
    DeletePassage,
    DetachBlock,
    DetachTool,
    InsertPassage,
    ListPassages,
    PassageHit,
    PassageRecord,
    RunTool,
    SearchPassages,
    SetToolApproval,
    ToolRunResult,
    ToolSpec,
    UpdateAgent,
    UpdateBlock,
    builtin_id,
    default_tool_names,
    load_blocks,
    load_tools,
    load_view,
)
from kelpie_agent.agent._codec import unpack
from kelpie_agent.agent._identities import link_key

from . import _validate as v
from ._base import SETTLED
from ._conversations import Conversations
from ._errors import ConflictError, InvalidError, NotFoundError
from ._index import RepairReport, _all, repair, scan_index, window
from ._records import IndexEntry, index_entry
from ._types import paginate

__all__ = ["AgentService"]

_SESSIONS = b"session/"  # session/<agent_id>: the agent's latest run's checkpoint


def _page(limit: int | None) -> int | None:
    return None if limit is None else v.page_limit(limit)


def _gone(kind: str) -> Any:
    """``settled`` for deletes and detaches: after a lost outcome, "not found" means done."""
    return lambda error: isinstance(error, NotFoundError) and error.kind == kind


class AgentService(Conversations):
    """The agents of a deployment, served through one node. See docs/service.md."""

    # -- agents --------------------------------------------------------------------------------
    async def create_agent(
        self,
        request: CreateAgent,
        *,
        tools: Sequence[str] = (),
        include_base_tools: bool = True,
    ) -> AgentView:
        """Create an agent with a new id. ``tools`` names tools to attach besides
        ``request.tool_ids``; ``include_base_tools`` adds the agent type's built-ins (Letta's
        default). An empty ``name`` becomes the agent's id."""
        self._check_running()
        v.create_request(request)
        names = v.tags(tools, "tools")
        base = default_tool_names(request.agent_type) if include_base_tools else ()
        ids = [builtin_id(n) for n in base] + list(request.tool_ids)
        for i, name in enumerate(names):
            try:
                ids.append((await self.tool_named(name)).id)
            except NotFoundError:
                raise InvalidError(f"tools[{i}]", f"no tool named {name!r}", status=400) from None
        tool_ids = tuple(dict.fromkeys(ids))
        for i, tool_id in enumerate(request.tool_ids):
            await self._exists(self.get_tool(tool_id), "tool", tool_id, f"tool_ids[{i}]")
        for i, block_id in enumerate(request.block_ids):
            await self._exists(self.get_block(block_id), "block", block_id, f"block_ids[{i}]")
        agent_id = self.ports.ids.new("agent")
        create = attrs.evolve(request, name=request.name or agent_id, tool_ids=tool_ids)
        answer = await self._request(
            agent_id, create, settled=lambda e: isinstance(e, ConflictError) and e.exists
        )
        if answer is SETTLED:  # an earlier attempt created it
            return await self.get_agent(agent_id)
        view: AgentView = answer
        return view

    @staticmethod
    async def _exists(lookup: Any, kind: str, id: str, field: str) -> None:
        """An id the request body names must exist: 400 naming the field if not (a 404 would
        say the resource the URL names is missing)."""
        try:
            await lookup
        except NotFoundError:
            raise InvalidError(field, f"{kind} {id!r} not found", status=400) from None

    async def get_agent(self, agent_id: str) -> AgentView:
        self._check_running()
        view = await load_view(
            self.read, v.ident(agent_id, "agent_id"), self.loop_config.history_window
        )
        if view is None:
            raise NotFoundError("agent", agent_id)
        return view

    async def list_agents(
        self,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 50,
        order: str = "desc",
        name: str | None = None,
        tags: Sequence[str] = (),
        match_all_tags: bool = False,
        query_text: str | None = None,
        identity_id: str | None = None,
        last_stop_reason: str | None = None,
    ) -> list[AgentView]:
        """Agents by creation time (newest first by default), from the agent index: no actor
        is activated. ``name`` matches exactly, ``query_text`` is a case-insensitive part of
        the name, ``tags`` any (or with ``match_all_tags`` all) of the agent's tags;
        ``after``/``before`` are agent ids relative to the listing order."""
        self._check_running()
        limit, descending = v.page_limit(limit), v.order(order)
        wanted = set(v.tags(tags))
        if name is not None:
            v.text(name, "name")
        if query_text is not None:
            v.text(query_text, "query_text", empty=True)
        needle = query_text.casefold() if query_text else None
        cursors = {
            cursor: await self._cursor(cursor, field)
            for field, cursor in (("after", after), ("before", before))
            if cursor is not None
        }

        only = await self._agents_matching(identity_id, last_stop_reason)

        def keep(entry: IndexEntry) -> bool:
            if only is not None and entry.agent_id not in only:
                return False
            if name is not None and entry.name != name:
                return False
            if needle is not None and needle not in entry.name.casefold():
                return False
            if wanted:
                have = wanted & set(entry.tags)
                return have == wanted if match_all_tags else bool(have)
            return True

        win = window(descending, after, before)
        entries = await scan_index(
            self.read,
            low=cursors[win.low] if win.low is not None else None,
            high=cursors[win.high] if win.high is not None else None,
            from_high=win.from_high,
            limit=limit,
            keep=keep,
        )
        if win.reverse:
            entries.reverse()
        views = [
            await load_view(self.read, e.agent_id, self.loop_config.history_window) for e in entries
        ]
        return [view for view in views if view is not None]

    async def _agents_matching(
        self, identity_id: str | None, last_stop_reason: str | None
    ) -> set[str] | None:
        """The agents attached to identity ``identity_id`` and whose latest run stopped for
        ``last_stop_reason`` (None: no such filter)."""
        only: set[str] | None = None
        if identity_id is not None:
            prefix = link_key(v.ident(identity_id, "identity_id"), "")
            only = {key[len(prefix) :].decode() for key, _ in await _all(self.read, prefix)}
        if last_stop_reason is not None:
            stopped = {
                key[len(_SESSIONS) :].decode()
                for key, data in await _all(self.read, _SESSIONS)
                if unpack(data).stop_reason == last_stop_reason
            }
            only = stopped if only is None else only & stopped
        return only

    async def _cursor(self, agent_id: str, field: str) -> bytes:
        v.ident(agent_id, field)
        try:
            agent = await self._agent(agent_id, field)
        except NotFoundError:
            raise NotFoundError(
                "agent", agent_id, f"{field}: agent {agent_id!r} not found"
            ) from None
        return index_entry(agent).key

    async def update_agent(self, agent_id: str, changes: Mapping[str, Any]) -> AgentView:
        """Change the agent's fields (as Letta's PATCH: only those given). ``tool_ids`` and
        ``block_ids`` replace the attached sets (detaching, then attaching, one by one)."""
        current = await self._agent(agent_id)
        values = v.agent_changes(changes)
        tool_ids = values.pop("tool_ids", None)
        block_ids = values.pop("block_ids", None)
        for i, tool_id in enumerate(tool_ids or ()):
            await self._exists(self.get_tool(tool_id), "tool", tool_id, f"tool_ids[{i}]")
        for i, block_id in enumerate(block_ids or ()):
            await self._exists(self.get_block(block_id), "block", block_id, f"block_ids[{i}]")
        if values:
            await self._request(agent_id, UpdateAgent(values))
        if tool_ids is not None:
            for tool_id in current.tool_ids:
                if tool_id not in tool_ids:
                    await self._request(agent_id, DetachTool(tool_id), settled=_gone("tool"))
            for tool_id in tool_ids:
                await self._request(agent_id, AttachTool(tool_id))
        if block_ids is not None:
            for block_id in current.block_ids:
                if block_id not in block_ids:
                    await self._request(agent_id, DetachBlock(block_id), settled=_gone("block"))
            for block_id in block_ids:
                await self._request(agent_id, AttachBlock(block_id))
        return await self.get_agent(agent_id)

    async def set_tool_approval(self, agent_id: str, tool_name: str, required: bool) -> AgentView:
        """Whether calls of the agent's tool ``tool_name`` wait for a client's approval: adds
        or removes its ``requires_approval`` rule, on the agent's actor (atomic)."""
        await self._agent(agent_id)
        view: AgentView = await self._request(agent_id, SetToolApproval(tool_name, required))
        return view

    async def delete_agent(self, agent_id: str) -> None:
        """Delete the agent, its history, archival memory and records (its blocks stay)."""
        await self._agent(agent_id)
        await self._request(agent_id, DeleteAgent(), settled=_gone("agent"))

    async def repair(self) -> RepairReport:
        """Rebuild missing index entries and sweep the records of deleted agents (see
        docs/service.md, "The agent index"). Safe while agents are busy."""
        self._check_running()
        return await repair(self.kv, self.read)

    # -- an agent's core memory ----------------------------------------------------------------
    async def list_agent_blocks(
        self,
        agent_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        order: str = "asc",
    ) -> list[Block]:
        """The agent's blocks in attachment order (``asc``), paged with Letta's cursors
        (block ids); all of them by default."""
        limit, descending = _page(limit), v.order(order)
        blocks = await load_blocks(self.read, await self._agent(agent_id))
        return paginate(
            blocks,
            lambda b: b.id,
            kind="block",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def get_agent_block(self, agent_id: str, label: str) -> Block:
        agent = await self._agent(agent_id)
        v.label(label)
        for block in await load_blocks(self.read, agent):
            if block.label == label:
                return block
        raise NotFoundError("block", label, f"agent {agent_id} has no block labelled {label!r}")

    async def update_agent_block(
        self,
        agent_id: str,
        label: str,
        *,
        value: str | None = None,
        limit: int | None = None,
        description: str | None = None,
        read_only: bool | None = None,
        new_label: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Block:
        block = await self.get_agent_block(agent_id, label)
        self._check_block(
            value=block.value if value is None else value,
            limit=block.limit if limit is None else limit,
            description=block.description if description is None else description,
            read_only=block.read_only if read_only is None else read_only,
            metadata=block.metadata if metadata is None else metadata,
            **({"label": new_label} if new_label is not None else {}),
        )
        request = UpdateBlock(label, value, limit, description, read_only, new_label, metadata)
        updated: Block = await self._request(agent_id, request)
        return updated

    async def attach_block(self, agent_id: str, block_id: str) -> AgentView:
        await self._agent(agent_id)
        await self.get_block(block_id)
        view: AgentView = await self._request(agent_id, AttachBlock(block_id))
        return view

    async def detach_block(self, agent_id: str, block_id: str) -> AgentView:
        await self._agent(agent_id)
        v.ident(block_id, "block_id")
        answer = await self._request(agent_id, DetachBlock(block_id), settled=_gone("block"))
        return await self.get_agent(agent_id) if answer is SETTLED else answer

    # -- archival memory -----------------------------------------------------------------------
    async def insert_passage(
        self, agent_id: str, text: str, *, tags: Sequence[str] = ()
    ) -> list[PassageRecord]:
        """Store a passage (embedded by the node's embedder). Not retried once its outcome
        is unknown (it would be stored twice): that is an :class:`UnavailableError`."""
        await self._agent(agent_id)
        request = InsertPassage(v.text(text, "text"), v.tags(tags))
        inserted: list[PassageRecord] = await self._request(
            agent_id, request, retry_unknown=False, idempotent=False
        )
        return inserted

    async def list_passages(
        self,
        agent_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        search: str | None = None,
        ascending: bool = True,
    ) -> list[PassageRecord]:
        """A page of archival passages, oldest first by default (Letta's cursors)."""
        await self._agent(agent_id)
        limit = v.page_limit(limit)
        if search is not None:
            v.text(search, "search", empty=True)
        for field, cursor in (("after", after), ("before", before)):
            if cursor is not None:
                v.ident(cursor, field)
        win = window(not ascending, after, before)
        request = ListPassages(win.low, win.high, limit, search, ascending=not win.from_high)
        page: list[PassageRecord] = await self._request(agent_id, request)
        return page[::-1] if win.reverse else page

    async def search_passages(
        self,
        agent_id: str,
        query: str,
        *,
        tags: Sequence[str] = (),
        tag_match_mode: str = "any",
        top_k: int = 5,
        start: float | None = None,
        end: float | None = None,
    ) -> list[PassageHit]:
        """Semantic search (best first); ``start``/``end`` are epoch seconds, inclusive."""
        await self._agent(agent_id)
        if tag_match_mode not in ("any", "all"):
            raise InvalidError("tag_match_mode", f"must be 'any' or 'all', got {tag_match_mode!r}")
        bounds = [
            None if t is None else v.number(t, f) for f, t in (("start", start), ("end", end))
        ]
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            raise InvalidError("end", f"is before start ({end} < {start})", status=400)
        request = SearchPassages(
            v.text(query, "query"),
            v.tags(tags),
            tag_match_mode,  # type: ignore[arg-type]
            v.int_at_least(top_k, "top_k", 0, v.MAX_PAGE),
            bounds[0],
            bounds[1],
        )
        hits: list[PassageHit] = await self._request(agent_id, request)
        return hits

    async def delete_passage(self, agent_id: str, passage_id: str) -> None:
        await self._agent(agent_id)
        v.ident(passage_id, "passage_id")
        await self._request(agent_id, DeletePassage(passage_id), settled=_gone("passage"))

    # -- an agent's tools ----------------------------------------------------------------------
    async def list_agent_tools(
        self,
        agent_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        order: str = "asc",
    ) -> list[ToolSpec]:
        """The agent's tools in attachment order (``asc``), paged with Letta's cursors (tool
        ids); all of them by default."""
        limit, descending = _page(limit), v.order(order)
        tools = await load_tools(self.read, await self._agent(agent_id))
        return paginate(
            [t.spec for t in tools.tools.values()],
            lambda t: t.id,
            kind="tool",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def attach_tool(self, agent_id: str, tool_id: str) -> AgentView:
        await self._agent(agent_id)
        await self.get_tool(tool_id)
        view: AgentView = await self._request(agent_id, AttachTool(tool_id))
        return view

    async def detach_tool(self, agent_id: str, tool_id: str) -> AgentView:
        await self._agent(agent_id)
        v.ident(tool_id, "tool_id")
        answer = await self._request(agent_id, DetachTool(tool_id), settled=_gone("tool"))
        return await self.get_agent(agent_id) if answer is SETTLED else answer

    async def run_tool(
        self, agent_id: str, name: str, args: Mapping[str, Any] | None = None
    ) -> ToolRunResult:
        """Run one of the agent's tools once, outside any run (Letta's tool run). Not retried
        once its outcome is unknown (the tool may have run)."""
        await self._agent(agent_id)
        v.text(name, "name")
        arguments = v.metadata(args if args is not None else {}, "args")
        try:
            result: ToolRunResult = await self._request(
                agent_id, RunTool(name, dict(arguments)), retry_unknown=False, idempotent=False
            )
        except InvalidError as error:  # the arguments do not fit the tool's own schema
            raise InvalidError("args", error.detail, status=400) from error
        return result
