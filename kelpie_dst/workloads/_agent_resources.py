"""The REST resources nobody read back yet, made, changed and read back (``resources``, via
HTTP).

With ``resources`` on, once the agents' clients are done (the faults go on), one more client,
on random nodes, hopping after failures, keeps a model of what it set (the readback walker's
:class:`~._agent_readback_checks.ReadbackLog`, so ``readback_consistent``'s properties judge
it) and reads each thing back through every route that shows it:

1. **Tool rules**: an agent made with one rule of every type, every field of each type set
   (conditional's ``default_child`` and ``require_output_mapping``, ``child_arg_nodes``,
   ``max_count_limit``, ``args``, ``prompt_template``); each rule shown (create answer,
   retrieve, list) must show every field the client set; the rules read back and PATCHed
   unchanged must read back the same. That agent is never sent a message.
2. **Approvals**: ``PATCH .../tools/approval/{tool}`` with ``requires_approval`` true, then
   false, in the body: each answer and a retrieve after it show a ``requires_approval`` rule
   for the tool exactly while the client last asked for one.
3. **Conversations**: made with a summary and a description (one ``hidden``, one forked
   ``hidden``); PATCHed with ``null`` (clears), ``""`` and ``archived``; each answer, retrieve
   and list item shows what was set; ``conversations.list`` by ``archive_status`` holds exactly
   the client's visible conversations of that status (hidden ones never); the list reads the
   same newest first reversed and walked by ``after`` in pages of one or two.
4. **Message search**: a send in a conversation and one in the agent's own history, both with
   one word; ``messages.search(conversation_id=...)`` finds only messages of that conversation
   (the filter keeps what it names), ``agent_id`` only that agent's.
5. **MCP servers**: three (stdio with ``env``, SSE and Streamable HTTP with ``auth_token`` and
   custom headers) at addresses nothing serves; every answer (create, retrieve, list, update)
   shows what was set, and **no answer ever shows a secret the client sent** (docs/mcp.md:
   masked as ``****``); a rename to a name another server has is refused with a 409 and names
   stay unique in the list; a rename to a free name reads back.
6. **Folders and limits, at and past**: a folder whose metadata is nested exactly
   ``MAX_DEPTH`` (32) levels is accepted and reads back equal (docs/http-api.md); PATCHed with
   ``""`` and ``{}`` (falsy values are values) it reads them back; one level more is a 422.

A request refused that the contract accepts ends its phase as a problem (the walker's
``_phases``); a request the contract refuses (a taken name, a nesting past the limit) is
expected refused, and its acceptance is a problem.
"""

from __future__ import annotations

from typing import Any

import letta_client

from ._agent_lists import walk
from ._agent_readback import ReadbackWalker, _items

__all__ = ["MARK", "RESOURCE_AGENTS", "ResourceWalker", "nested", "secrets_in"]

RESOURCE_AGENTS = ("resources-agent-0", "resources-agent-1")
MARK = "mark-a917"
"""The resource agents' marker (``_agent_prompt.AGENT_MARK``); no planned agent has 917."""
MAX_DEPTH = 32  # docs/http-api.md: a JSON value at most 32 levels deep
WORD = "cormorant"  # in the searched sends only
TOOL = '''def rs_probe(note: str) -> str:
    """Probe the resources.

    Args:
        note: what to note

    Returns:
        str: the note
    """
    return note
'''
FOLDER_VALUES: dict[str, tuple[Any, ...]] = {
    "description": ("", "shelved", "a deep folder"),
    "instructions": ("", "skim it"),
    "metadata": ({}, {"shelf": 3}),
}
SECRETS = ("tok-9f3a-resources", "hdr-51c2-resources", "env-7d0e-resources")


def nested(levels: int) -> dict[str, Any]:
    """A JSON object whose deepest value is ``levels`` levels down (``{"d": {"d": ... 1}}``)."""
    value: Any = 1
    for _ in range(levels):
        value = {"d": value}
    return value  # type: ignore[no-any-return]


def secrets_in(value: Any, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    """The secrets ``value`` (an answer as JSON) shows anywhere, keys or values."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found |= {s for s in secrets if s in item}
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return sorted(found)


def _json(answer: Any) -> Any:
    dump = getattr(answer, "model_dump", None)
    return dump(mode="json") if dump is not None else answer


def _rules(seed: int) -> list[dict[str, Any]]:
    """One rule of every type, every field of its type set (tools nobody calls)."""
    return [
        {"tool_name": "rs_first", "type": "run_first", "args": {"note": f"first {seed}"}},
        {"tool_name": "rs_exit", "type": "exit_loop"},
        {"tool_name": "rs_go_on", "type": "continue_loop"},
        {
            "tool_name": "rs_branch",
            "type": "conditional",
            "child_output_mapping": {"yes": "rs_yes", "no": "rs_no"},
            "default_child": "rs_fallback",
            "require_output_mapping": seed % 2 == 0,
        },
        {
            "tool_name": "rs_parent",
            "type": "constrain_child_tools",
            "children": ["rs_child_a", "rs_child_b"],
            "child_arg_nodes": [{"name": "rs_child_b", "args": {"note": f"child {seed}"}}],
        },
        {"tool_name": "rs_last", "type": "parent_last_tool", "children": ["rs_after"]},
        {"tool_name": "rs_must", "type": "required_before_exit"},
        {"tool_name": "rs_capped", "type": "max_count_per_step", "max_count_limit": 2 + seed},
        {
            "tool_name": "rs_gated",
            "type": "requires_approval",
            "prompt_template": f"ask first ({seed})",
        },
    ]


def _rule_key(agent: str, rule: Any) -> str:
    return f"rule:{agent}:{rule['tool_name']}:{rule['type']}"


class ResourceWalker(ReadbackWalker):
    """Makes, changes and reads back (see the module docstring)."""

    PREFIX = "resources"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.secret_shown: list[str] = []  # routes that showed a secret (judged)
        self.refusals: list[tuple[str, bool]] = []  # (what, refused as the contract says)
        # a visible conversation's create needed a second attempt: the first may have landed
        # too, so a conversation the client did not make may be listed
        self.conversations_unclean = False

    async def run(self) -> None:
        await self._phases(
            (
                self._agents,
                self._tool_rules,
                self._approvals,
                self._conversations,
                self._search,
                self._mcp_servers,
                self._limits,
            ),
            lambda phase: (
                phase in (self._agents, self._mcp_servers, self._limits)
                or len(self.agents) == len(RESOURCE_AGENTS)
            ),
        )

    def problems_found(self) -> list[str]:
        """What this walker's own properties find (``check_readback`` judges the log)."""
        out = [f"{route}: shows a secret the client sent" for route in self.secret_shown]
        out += [
            f"{what}: accepted, but the contract refuses it" for what, ok in self.refusals if not ok
        ]
        return out

    def _no_secret(self, route: str, answer: Any) -> None:
        found = secrets_in(_json(answer))
        if found:
            self.secret_shown.append(f"{route} ({', '.join(found)})")

    async def _refused(self, what: str, request: Any, statuses: tuple[int, ...]) -> None:
        """``request(sdk)`` must be refused with one of ``statuses`` (a retry of a refusal is
        the same refusal: nothing was written)."""

        async def attempt(sdk: Any, _: int) -> bool:
            try:
                await request(sdk)
            except letta_client.APIStatusError as error:
                if error.status_code in statuses:
                    return True
                raise
            return False

        self.refusals.append((what, bool(await self._call(what, attempt))))

    # -- agents -------------------------------------------------------------------------------
    async def _agents(self) -> None:
        async def find_tool(sdk: Any) -> Any:
            page = await sdk.tools.list(name="rs_probe", limit=1)
            return page.items[0] if page.items else None

        tool = await self._create(
            "tool rs_probe", find_tool, lambda sdk: sdk.tools.create(source_code=TOOL)
        )
        seed = self.rng.randint(0, 7)
        for n, name in enumerate(RESOURCE_AGENTS):
            rules = _rules(seed) if n == 1 else []

            async def find(sdk: Any, name: str = name) -> Any:
                page = await sdk.agents.list(name=name, limit=1, order="asc")
                return page.items[0] if page.items else None

            async def make(sdk: Any, name: str = name, rules: list[Any] = rules) -> Any:
                return await sdk.agents.create(
                    name=name,
                    include_base_tools=False,
                    tool_ids=[str(tool.id)],
                    tool_rules=rules,
                    memory_blocks=[
                        {
                            "label": "human",
                            "value": f"The resources walker ({MARK}).",
                            "limit": 4000,
                        },
                        {"label": "persona", "value": "A terse helper.", "limit": 4000},
                    ],
                )

            made = await self._create(f"agent {name}", find, make)
            self.agents.append(str(made.id))
            for rule in rules:
                self._set(_rule_key(str(made.id), rule), **rule)
            self._rules_shown("agents.create", made)

    def _rules_shown(self, route: str, agent: Any) -> None:
        """Every rule of an AgentState (an SDK model or its JSON) as the route showed it."""
        state = _json(agent)
        agent_id = str(state.get("id"))
        rules = list(state.get("tool_rules") or [])
        for rule in rules:
            self._show(route, _rule_key(agent_id, rule), **rule)
        want = self.log.model.get(f"approval:{agent_id}")
        if want is not None:
            gated = sorted(r["tool_name"] for r in rules if r.get("type") == "requires_approval")
            self._show(route, f"approval:{agent_id}", gated=gated)
        made = sorted(k for k in self.log.model if k.startswith(f"rule:{agent_id}:"))
        if made:
            shown = sorted(_rule_key(agent_id, r) for r in rules)
            self.log.members.append(
                (f"{route}: {agent_id}'s tool rules", made, [k for k in shown if k in made])
            )

    # -- 1. tool rules ------------------------------------------------------------------------
    async def _tool_rules(self) -> None:
        agent = self.agents[1]
        got = await self._sdk("agents.retrieve", agent)
        self._rules_shown("agents.retrieve", got)
        page = await self._sdk("agents.list", name=RESOURCE_AGENTS[1], limit=10)
        for item in page.items:
            self._rules_shown("agents.list(name)", item)
        # the rules as read back, sent back unchanged: they must read the same
        rules = [
            {k: v for k, v in r.items() if v is not None}
            for r in _json(got).get("tool_rules") or []
        ]
        answer = await self._sdk("agents.update", agent, tool_rules=rules)
        self._rules_shown("agents.update(tool_rules as read back)", answer)
        self._rules_shown(
            "agents.retrieve after the rules' round trip", await self._sdk("agents.retrieve", agent)
        )

    # -- 2. approvals -------------------------------------------------------------------------
    async def _approvals(self) -> None:
        agent = self.agents[0]
        gated: set[str] = set()
        self._set(f"approval:{agent}", gated=[])
        for flag in (True, False, True, False)[: self.rng.randint(2, 4)]:
            answer = await self._sdk(
                "agents.tools.update_approval",
                "rs_probe",
                agent_id=agent,
                body_requires_approval=flag,
            )
            gated = {"rs_probe"} if flag else set()
            self._set(f"approval:{agent}", gated=sorted(gated))
            self._rules_shown(f"agents.tools.update_approval(rs_probe, {flag})", answer)
            self._rules_shown(
                "agents.retrieve after an approval change",
                await self._sdk("agents.retrieve", agent),
            )
        if gated:  # leave the tool ungated: the agent is sent messages below
            answer = await self._sdk(
                "agents.tools.update_approval",
                "rs_probe",
                agent_id=agent,
                body_requires_approval=False,
            )
            self._set(f"approval:{agent}", gated=[])
            self._rules_shown("agents.tools.update_approval(rs_probe, False)", answer)

    # -- 3. conversations ---------------------------------------------------------------------
    def _conv_shown(self, route: str, conv: Any) -> None:
        self._show(
            route,
            f"conversation:{conv.id}",
            summary=conv.summary,
            description=conv.description,
            archived=bool(conv.archived),
        )

    async def _conversation(self, agent: str, summary: str, hidden: bool) -> str:
        async def find(sdk: Any) -> Any:
            # a hidden one is in no list: it is looked up by the visible ones' absence only
            got = _items(
                await sdk.conversations.list(agent_id=agent, limit=100, archive_status="all")
            )
            same = [c for c in got if c.summary == summary]
            return same[0] if same else None

        made = await self._create(
            f"conversation {summary}",
            find if not hidden else (lambda sdk: _none()),
            lambda sdk: sdk.conversations.create(
                agent_id=agent, summary=summary, description=f"about {summary}", hidden=hidden
            ),
        )
        conv_id = str(made.id)
        if not self.created_once and not hidden:
            self.conversations_unclean = True
        self._set(
            f"conversation:{conv_id}",
            summary=summary,
            description=f"about {summary}",
            archived=False,
            hidden=hidden,
        )
        self._conv_shown("conversations.create", made)
        return conv_id

    async def _conversations(self) -> None:
        agent = self.agents[0]
        visible = [await self._conversation(agent, f"rs thread {n}", False) for n in range(2)]
        hidden = [await self._conversation(agent, "rs hidden thread", True)]
        fork = await self._sdk("conversations.fork", visible[0], hidden=True)
        self._set(
            f"conversation:{fork.id}",
            summary=fork.summary,
            description=fork.description,
            archived=False,
            hidden=True,
        )
        hidden.append(str(fork.id))
        # PATCHes: null clears, "" is a value, archived flips
        for n, conv_id in enumerate(visible):
            changes: dict[str, Any] = {}
            if n == 0:  # a text set before is cleared
                changes[self.rng.choice(("summary", "description"))] = None
            while not changes:
                if self.rng.random() < 0.6:
                    changes["summary"] = self.rng.choice((None, "", f"renamed {conv_id[-4:]}"))
                if self.rng.random() < 0.6:
                    changes["description"] = self.rng.choice((None, "", "changed"))
                if self.rng.random() < 0.4:
                    changes["archived"] = True
            got = await self._sdk("conversations.update", conv_id, **changes)
            self._set(f"conversation:{conv_id}", **changes)
            self._conv_shown(f"conversations.update({sorted(changes.items())})", got)
            self._conv_shown(
                "conversations.retrieve", await self._sdk("conversations.retrieve", conv_id)
            )
        made = {
            k.split(":", 1)[1]: v
            for k, v in self.log.model.items()
            if k.startswith("conversation:")
        }
        for status in ("unarchived", "archived", "all"):
            got = _items(
                await self._sdk(
                    "conversations.list", agent_id=agent, limit=100, archive_status=status
                )
            )
            route = f"conversations.list(agent_id={agent}, archive_status={status})"
            for c in got:
                self._conv_shown(route, c)
            want = sorted(
                i
                for i, m in made.items()
                if not m.get("hidden")
                and (status == "all" or bool(m.get("archived")) == (status == "archived"))
            )
            self.log.members.append(
                (route, want, sorted(str(c.id) for c in got if str(c.id) in made))
            )
            if status == "all" and not self.conversations_unclean:  # made once each: no other
                others = sorted(str(c.id) for c in got if str(c.id) not in made)
                self.log.members.append((f"{route}: none the client did not make", [], others))
        await self._conversation_walks(agent)

    async def _conversation_walks(self, agent: str) -> None:
        """The agent's conversations (every status) both orders in one page and walked by
        ``after`` in small pages (the route has no ``before``)."""
        what = f"conversations.list(agent_id={agent}, archive_status=all)"

        async def fetch(
            order: str, after: str | None, before: str | None, limit: int
        ) -> list[tuple[str, str, Any]]:
            got = _items(
                await self._sdk(
                    "conversations.list",
                    agent_id=agent,
                    archive_status="all",
                    order=order,
                    limit=limit,
                    **({"after": after} if after is not None else {}),
                )
            )
            for c in got:
                self._conv_shown(what, c)
            return [(str(c.id), "", None) for c in got]

        asc = [i for i, _, _ in await fetch("asc", None, None, 100)]
        desc = [i for i, _, _ in await fetch("desc", None, None, 100)]
        walks = [
            await walk(fetch, order, "after", self.rng.randint(1, 2), None)
            for order in ("asc", "desc")
        ]
        if [i for i, _, _ in await fetch("asc", None, None, 100)] != asc:
            self.log.unsettled.append(what)
            return
        self.log.orders.append((what, asc, desc))
        self.log.walks.append((what, asc, walks))

    # -- 4. message search --------------------------------------------------------------------
    async def _send_in(self, conv_id: str | None, otid: str, text: str) -> None:
        agent = self.agents[0]
        if conv_id is None:
            await self._sdk(
                "agents.messages.create",
                agent,
                messages=[{"role": "user", "content": text, "otid": otid}],
            )
            return

        async def attempt(sdk: Any, _: int) -> None:
            stream = await sdk.conversations.messages.create(
                conv_id, messages=[{"role": "user", "content": text, "otid": otid}]
            )
            stop = None
            async for chunk in stream:
                if chunk.message_type == "stop_reason":
                    stop = chunk.stop_reason
            if stop is None:
                from ._agent_http import IncompleteStreamError, unterminated

                self.clients.link.unterminated.append(unterminated(f"resources {otid}"))
                raise IncompleteStreamError("the stream ended before its stop reason")

        await self._call("conversations.messages.create", attempt)

    async def _search(self) -> None:
        agent = self.agents[0]
        conv = next(
            (
                k.split(":", 1)[1]
                for k, m in self.log.model.items()
                if k.startswith("conversation:") and not m.get("hidden") and not m.get("archived")
            ),
            None,
        )
        if conv is None:
            conv = await self._conversation(agent, "rs search thread", False)
        self._set(f"agent:{agent}", agent_id=agent)
        await self._send_in(conv, "resources-search-0", f"a {WORD} in the thread ({MARK})")
        await self._send_in(None, "resources-search-1", f"a {WORD} at home ({MARK})")
        in_thread = _items(await self._sdk("conversations.messages.list", conv, limit=1000))
        thread_ids = {str(m.id) for m in in_thread}
        for mode in ("fts", "hybrid"):
            hits = list(
                await self._sdk(
                    "messages.search",
                    query=WORD,
                    conversation_id=conv,
                    search_mode=mode,
                    limit=100,
                )
            )
            got = [str(h.message_id) for h in hits]
            self.log.members.append(
                (
                    f"messages.search({WORD!r}, conversation_id={conv}, {mode}): only the "
                    "conversation's messages",
                    sorted(i for i in got if i in thread_ids),
                    sorted(got),
                )
            )
            for h in hits:
                self._show("messages.search", f"agent:{agent}", agent_id=h.agent_id)
        limit = self.rng.choice((1, 2, 100))
        hits = list(await self._sdk("messages.search", query=WORD, agent_id=agent, limit=limit))
        for h in hits:
            self._show(f"messages.search(agent_id={agent})", f"agent:{agent}", agent_id=h.agent_id)
        if len(hits) > limit:
            self.log.problems.append(f"messages.search(limit={limit}): {len(hits)} hits")

    # -- 5. MCP servers -----------------------------------------------------------------------
    def _server_shown(self, route: str, server: Any) -> None:
        state = _json(server)
        self._no_secret(route, state)
        fields = {
            k: state.get(k)
            for k in (
                "server_name",
                "mcp_server_type",
                "server_url",
                "command",
                "args",
                "auth_header",
            )
            if k in state
        }
        self._show(route, f"mcp:{state.get('id')}", **fields)

    async def _mcp_servers(self) -> None:
        tag = self.rng.randint(100, 999)
        configs: list[tuple[str, dict[str, Any]]] = [
            (
                f"rs-http-{tag}",
                {
                    "mcp_server_type": "streamable_http",
                    "server_url": "http://mcp-nobody.invalid:9/mcp",
                    "auth_header": "Authorization",
                    "auth_token": SECRETS[0],
                    "custom_headers": {"X-Resources": SECRETS[1]},
                },
            ),
            (
                f"rs-sse-{tag}",
                {
                    "mcp_server_type": "sse",
                    "server_url": "http://mcp-nobody.invalid:9/sse",
                    "auth_header": "X-Token",
                    "auth_token": SECRETS[0],
                },
            ),
            (
                f"rs-stdio-{tag}",
                {
                    "mcp_server_type": "stdio",
                    "command": "rs-mcp-nowhere",
                    "args": ["--quiet"],
                    "env": {"RS_KEY": SECRETS[2]},
                },
            ),
        ]
        ids: list[str] = []
        names: dict[str, str] = {}
        for name, config in configs:

            async def find(sdk: Any, name: str = name) -> Any:
                return next(
                    (s for s in await sdk.mcp_servers.list() if s.server_name == name), None
                )

            async def make(sdk: Any, name: str = name, config: dict[str, Any] = config) -> Any:
                return await sdk.mcp_servers.create(server_name=name, config=config)

            made = await self._create(f"mcp server {name}", find, make)
            server_id = str(made.id)
            public = {
                k: v for k, v in config.items() if k not in ("auth_token", "custom_headers", "env")
            }
            self._set(f"mcp:{server_id}", server_name=name, **public)
            self._server_shown("mcp_servers.create", made)
            ids.append(server_id)
            names[server_id] = name
        for server_id in ids:
            self._server_shown(
                "mcp_servers.retrieve", await self._sdk("mcp_servers.retrieve", server_id)
            )
        # a rename to a taken name is refused; to a free one, it reads back
        first, second = ids[0], ids[1]
        kind = dict(configs)[names[second]]["mcp_server_type"]
        await self._refused(
            f"mcp_servers.update({second}, server_name={names[first]!r}) (taken)",
            lambda sdk: sdk.mcp_servers.update(
                second, server_name=names[first], config={"mcp_server_type": kind}
            ),
            (400, 409),
        )
        fresh = f"rs-renamed-{tag}"
        got = await self._sdk(
            "mcp_servers.update", second, server_name=fresh, config={"mcp_server_type": kind}
        )
        self._set(f"mcp:{second}", server_name=fresh)
        names[second] = fresh
        self._server_shown("mcp_servers.update(server_name)", got)
        listed = list(await self._sdk("mcp_servers.list"))
        for server in listed:
            self._server_shown("mcp_servers.list", server)
        all_names = [str(s.server_name) for s in listed]
        dupes = sorted({n for n in all_names if all_names.count(n) > 1})
        if dupes:
            self.log.problems.append(f"mcp_servers.list: names shown more than once: {dupes}")
        self.log.members.append(
            (
                "mcp_servers.list: the client's servers",
                sorted(ids),
                sorted(str(s.id) for s in listed if str(s.id) in names),
            )
        )

    # -- 6. limits ----------------------------------------------------------------------------
    async def _limits(self) -> None:
        name = f"rs-deep-{self.rng.randint(100, 999)}"
        deep = nested(MAX_DEPTH)

        async def find(sdk: Any) -> Any:
            page = await sdk.folders.list(name=name, limit=1)
            items = _items(page)
            return items[0] if items else None

        made = await self._create(
            f"folder {name}",
            find,
            lambda sdk: sdk.folders.create(
                name=name, metadata=deep, description="a deep folder", instructions="read it"
            ),
        )
        key = f"folder:{made.id}"
        self._set(key, metadata=deep, description="a deep folder", instructions="read it")
        self._folder_shown("folders.create", made)
        got = await self._sdk("folders.retrieve", str(made.id))
        self._folder_shown("folders.retrieve", got)
        # falsy values are values: "" and {} replace what was there (null leaves it)
        for n in range(2):
            changes: dict[str, Any] = {}
            if n == 0:  # one field set before becomes falsy
                field = self.rng.choice(sorted(FOLDER_VALUES))
                changes[field] = FOLDER_VALUES[field][0]
            while not changes:
                for field, values in FOLDER_VALUES.items():
                    if self.rng.random() < 0.5:
                        changes[field] = self.rng.choice(values)
            got = await self._sdk("folders.update", str(made.id), **changes)
            self._set(key, **changes)
            self._folder_shown(f"folders.update({sorted(changes)})", got)
            got = await self._sdk("folders.retrieve", str(made.id))
            self._folder_shown("folders.retrieve after an update", got)
        deep = nested(MAX_DEPTH)
        got = await self._sdk("folders.update", str(made.id), metadata=deep)
        self._set(key, metadata=deep)
        self._folder_shown("folders.update(metadata at the limit)", got)
        await self._refused(
            f"folders.update(metadata {MAX_DEPTH + 1} levels deep)",
            lambda sdk: sdk.folders.update(str(made.id), metadata=nested(MAX_DEPTH + 1)),
            (400, 422),
        )
        got = await self._sdk("folders.retrieve", str(made.id))
        self._folder_shown("folders.retrieve after a refused update", got)

    def _folder_shown(self, route: str, folder: Any) -> None:
        self._show(
            route,
            f"folder:{folder.id}",
            metadata=dict(folder.metadata or {}),
            description=folder.description,
            instructions=folder.instructions,
        )


async def _none() -> None:
    return None
