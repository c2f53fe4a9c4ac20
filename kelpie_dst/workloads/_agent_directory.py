"""The cross-agent API areas, driven through the real SDK (``directory``, via HTTP).

With ``directory`` on, once the agents' clients are done (the faults go on: the scenario's
fault phase outlasts them), one more client, on random nodes, hopping after failures:

1. makes standalone blocks ``dir-<i>`` (mixed-case labels, values and descriptions; a retried
   create first looks its block up by label) and attaches block ``i`` to the first ``i``
   agents;
2. upserts custom tools ``Kelp_Probe_<i>`` with tags, updates each one's source alone (and
   reads it back), then upserts it again with a third source (an upsert is retry-safe: it
   replaces by name);
3. provisions two identities on the database (letta-client has no REST call to make one; the
   world's tools are provisioned the same way) and attaches them to agents over REST, then
   detaches one of them from one agent;
4. reads every reference (agents, blocks, tools, messages across agents), walks every filter
   in small pages both ways, reads each block's agents, searches the tools by tags (with and
   without a query), reads each agent's and each conversation's history to learn who owns
   each message, and searches the messages (all, one agent's, one conversation's).

:func:`._agent_directory_checks.check_directory` judges what was read against the model
(the ``lists_directory_exactly`` invariant). A request that fails with an error the client
must not retry is also recorded as failed (``every_request_completed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kelpie_agent.agent import IdentityStore

from ..shims import SimKV, open_kv, sim_ports
from ._agent_directory_checks import (
    AgentSeen,
    BlockSeen,
    DirectoryLog,
    Hit,
    MadeTool,
    RunSeen,
    ToolSeen,
    Walk,
)
from ._agent_walker import SdkWalker

__all__ = ["DirectoryWalker"]

BLOCKS = 4
TOOLS = 4
SEARCH_WORDS = ("kelp", "tide")  # words of the workload's messages (_agent_policy)
TOOL_SEARCHES: tuple[tuple[tuple[str, ...], str | None], ...] = (
    (("kelp-0",), None),
    (("reef-1", "reef-2"), None),  # any of them
    (("kelp-1",), "probe"),
)
WALKS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("blocks", {"label_search": "dIR-"}),  # case-insensitive parts
    ("blocks", {"value_search": "kelp forest"}),
    ("blocks", {"connected_to_agents_count_gt": 1}),
    ("blocks", {"connected_to_agents_count_lt": 2}),
    ("blocks", {"connected_to_agents_count_eq": [0, 2]}),
    ("tags", {}),
    ("tags", {"name": "G"}),
    ("tools", {"search": "kelp_PROBE"}),
    ("tools", {"tool_types": ["custom"]}),
    ("messages", {"include_return_message_types": ["assistant_message"]}),
    ("messages", {"include_return_message_types": ["user_message", "reasoning_message"]}),
    ("runs", {"statuses": ["completed", "failed"]}),
    ("runs", {"stop_reason": "end_turn"}),
    ("runs", {"background": False}),
)


def tool_source(number: int, version: int) -> str:
    """Custom tool ``Kelp_Probe_<number>``'s source, version ``version`` (its marker)."""
    return (
        f"def Kelp_Probe_{number}(text: str) -> str:\n"
        f'    """Probe the kelp forest (v{version}).\n\n'
        "    Args:\n"
        "        text: what to probe.\n\n"
        "    Returns:\n"
        "        str: the answer.\n"
        '    """\n'
        f"    return 'probe {number} v{version}: ' + text\n"
    )


def tool_tags(number: int) -> tuple[str, ...]:
    return (f"kelp-{number % 2}", f"reef-{number % 3}")


def _agent(a: Any) -> AgentSeen:
    return AgentSeen(
        str(a.id),
        str(a.name),
        tuple(a.tags or ()),
        tuple(str(b.id) for b in a.blocks or ()),
        tuple(getattr(a, "identity_ids", None) or ()),
        getattr(a, "last_stop_reason", None),
        getattr(a, "model", None),
    )


def _block(b: Any) -> BlockSeen:
    return BlockSeen(str(b.id), str(b.label or ""), str(b.value or ""), str(b.description or ""))


def _run(r: Any) -> RunSeen:
    return RunSeen(
        str(r.id), str(r.agent_id), r.status, r.stop_reason, r.conversation_id, r.background
    )


def _tool(t: Any) -> ToolSeen:
    return ToolSeen(
        str(t.id), str(t.name), str(t.tool_type), tuple(t.tags or ()), str(t.source_code or "")
    )


class DirectoryWalker(SdkWalker):
    """Drives the directory areas and logs what it read (see the module docstring)."""

    PREFIX = "dir"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = DirectoryLog()
        self.problems = self.log.problems

    async def run(self) -> None:
        try:
            agents = await self._agents()
            ids = [a.id for a in agents]
            await self._make_blocks(ids)
            await self._make_tools()
            await self._identities(ids)
            await self._read()
        except Exception as error:  # a request the client must not retry: recorded
            self.log.problems.append(f"directory: {type(error).__name__}: {error}")

    async def _agents(self) -> list[AgentSeen]:
        got = await self._sdk("agents.list", limit=1000, order="asc")
        return [_agent(a) for a in got.items]

    # -- making ----------------------------------------------------------------------------
    async def _create_block(self, label: str, value: str, description: str) -> str:
        """Block ``label`` made once: a retry first looks it up (the first attempt may have
        landed without an answer)."""

        async def create(sdk: Any, number: int) -> Any:
            if number > 1:
                found = await sdk.blocks.list(label=label, limit=1, order="asc")
                if found.items:
                    return found.items[0]
            return await sdk.blocks.create(
                label=label, value=value, description=description, limit=200
            )

        block = await self._call(f"block {label}", create)
        return str(block.id)

    async def _make_blocks(self, agents: Sequence[str]) -> None:
        for i in range(BLOCKS):
            label = f"Dir-{i}"
            value = f"Kelp Forest note {i}" if i % 2 else f"plain note {i}"
            description = f"Directory block {i}"
            block_id = await self._create_block(label, value, description)
            self.log.made_blocks[label] = BlockSeen(block_id, label, value, description)
            for agent_id in agents[:i]:
                await self._sdk("agents.blocks.attach", block_id, agent_id=agent_id)

    async def _make_tools(self) -> None:
        made = self.log.made_tools
        for i in range(TOOLS):
            name, tags = f"Kelp_Probe_{i}", tool_tags(i)
            first = await self._sdk("tools.upsert", source_code=tool_source(i, 1), tags=list(tags))
            tool_id = str(first.id)
            made[name] = MadeTool(name, tool_id, tags, "(v1)")
            await self._sdk("tools.update", tool_id, source_code=tool_source(i, 2))
            made[name] = MadeTool(name, tool_id, tags, "(v2)")
            seen = await self._sdk("tools.retrieve", tool_id)
            self.log.updated_tools.append(("(v2)", _tool(seen)))
            await self._sdk("tools.upsert", source_code=tool_source(i, 3), tags=list(tags))
            made[name] = MadeTool(name, tool_id, tags, "(v3)")

    async def _identities(self, agents: Sequence[str]) -> None:
        """Two identities (provisioned on the database: letta-client cannot make one),
        attached over REST to agents 0-1 and 1-2; then the first is detached from agent 1."""
        world = self.clients.world
        main = world.sim.current_node()
        assert main is not None
        store = IdentityStore(SimKV(open_kv(main, host=world.db).store), sim_ports(main))
        made = [await store.create(f"user-{k}", f"User {k}") for k in range(2)]
        plan = {made[0].id: list(agents[:2]), made[1].id: list(agents[1:3])}
        for identity, attached in plan.items():
            self.log.identities[identity] = set()
            for agent_id in attached:
                await self._sdk("agents.identities.attach", identity, agent_id=agent_id)
                self.log.identities[identity].add(agent_id)
        if len(agents) > 1:
            gone, agent_id = made[0].id, agents[1]
            await self._sdk("agents.identities.detach", gone, agent_id=agent_id)
            self.log.identities[gone].discard(agent_id)

    # -- reading ---------------------------------------------------------------------------
    async def _read(self) -> None:
        log = self.log
        log.agents = await self._agents()
        got = await self._sdk("blocks.list", limit=1000, order="asc")
        log.blocks = [_block(b) for b in got.items]
        got = await self._sdk("tools.list", limit=1000, order="asc")
        log.tools = [_tool(t) for t in got.items]
        got = await self._sdk("messages.list", limit=1000, order="asc")
        log.messages = [(str(m.id), str(m.message_type)) for m in got]
        got = await self._sdk("runs.list", limit=1000, order="asc")
        log.runs = [_run(r) for r in got.items]
        await self._walks()
        for made in log.made_blocks.values():
            got = await self._sdk("blocks.agents.list", made.id, limit=1000)
            log.block_agents[made.id] = tuple(str(a.id) for a in got.items)
        for tags, query in TOOL_SEARCHES:
            got = await self._sdk("tools.search", tags=list(tags), query=query, limit=50)
            log.tool_searches.append((tags, query is not None, tuple(str(h.tool.id) for h in got)))
        await self._histories()
        await self._searches()
        log.agent_models = {a.id: a.model for a in log.agents if a.model}
        log.models = [str(m.handle) for m in await self._sdk("models.list")]

    async def _walks(self) -> None:
        log = self.log
        walks = list(WALKS)
        agents = [a.id for a in log.agents]
        walks.append(("runs", {"agent_ids": agents[:2]}))
        threads = sorted({r.conversation_id for r in log.runs if r.conversation_id})
        walks += [("runs", {"conversation_id": c}) for c in threads[:1]]
        reasons = sorted({a.last_stop_reason for a in log.agents if a.last_stop_reason})
        for identity in log.identities:
            walks.append(("agents", {"identity_id": identity}))
            for reason in reasons[:1]:
                walks.append(("agents", {"identity_id": identity, "last_stop_reason": reason}))
        for area, params in walks:
            pairs = tuple(sorted((k, _frozen(v)) for k, v in params.items()))
            for order in ("asc", "desc"):
                size = int(self.rng.choice((1, 2) if area != "messages" else (3, 5)))
                got = await self._walk(area, params, order, size)
                log.walks.append(Walk(area, pairs, order, size, tuple(got)))
            if got:  # and backwards, by before cursors, from the last one (newest first)
                back = await self._walk_back(area, params, "desc", size, got[-1])
                log.walks.append(Walk(area, pairs, "desc", size, tuple(back), got[-1]))

    async def _walk(self, area: str, params: dict[str, Any], order: str, size: int) -> list[str]:
        """The filtered list in pages of ``size``, following ``after`` cursors to the end."""
        got: list[str] = []
        for _ in range(200):
            kwargs = dict(params, order=order, limit=size)
            if got:
                kwargs["after"] = got[-1]
            page = await self._sdk(f"{area}.list", **kwargs)
            items = page if isinstance(page, list) else page.items
            got += [str(x) if area == "tags" else str(x.id) for x in items]
            if len(items) < size:
                break
        return got

    async def _walk_back(
        self, area: str, params: dict[str, Any], order: str, size: int, cursor: str
    ) -> list[str]:
        """The filtered list before ``cursor`` in pages of ``size``, each page asked
        ``before`` the first item of the page read last (nearest the cursor first)."""
        got: list[str] = []
        for _ in range(200):
            kwargs = dict(params, order=order, limit=size, before=got[0] if got else cursor)
            page = await self._sdk(f"{area}.list", **kwargs)
            items = page if isinstance(page, list) else page.items
            got = [str(x) if area == "tags" else str(x.id) for x in items] + got
            if len(items) < size:
                break
        return got

    async def _histories(self) -> None:
        """Who owns each message: each agent's history, and each of its conversations'."""
        log = self.log
        for agent in log.agents:
            got = await self._sdk("agents.messages.list", agent.id, limit=1000)
            for m in got.items:
                log.owners[str(m.id)] = agent.id
                log.threads[str(m.id)] = agent.id
            for conv in await self._sdk("conversations.list", agent_id=agent.id):
                got = await self._sdk("conversations.messages.list", conv.id, limit=1000)
                for m in got.items:
                    log.owners[str(m.id)] = agent.id
                    log.threads[str(m.id)] = str(conv.id)

    async def _searches(self) -> None:
        """Every message search (fts): across agents, scoped to an agent, to a conversation."""
        log = self.log
        conversations = sorted({t for t in log.threads.values() if t.startswith("conv")})
        scopes: list[tuple[str | None, str | None]] = [(None, None)]
        scopes += [(a.id, None) for a in log.agents[:2]]
        scopes += [(None, c) for c in conversations[:2]]
        for word in SEARCH_WORDS:
            for agent_id, conv in scopes:
                label = f"messages.search({word!r}, agent_id={agent_id}, conversation_id={conv})"
                kwargs: dict[str, Any] = {"query": word, "search_mode": "fts", "limit": 100}
                if agent_id is not None:
                    kwargs["agent_id"] = agent_id
                if conv is not None:
                    kwargs["conversation_id"] = conv
                got = await self._sdk("messages.search", **kwargs)
                log.hits += [
                    Hit(label, str(h.message_id), str(h.agent_id), agent_id, conv) for h in got
                ]


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
