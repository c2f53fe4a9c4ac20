"""Deletes through the real letta_client SDK over HTTP (``deletes``, via HTTP).

With ``deletes`` on, once the agents' clients are done (the faults go on), one more client, on
random nodes, hopping after failures, makes things of every kind the API can delete, attaches
what attaches to an agent of its own, deletes one of each kind, and then reads everything it
made back through every route that shows it: at once, and again five virtual seconds later
(crashes, partitions and storage faults go on in between). The kinds: custom tools, standalone
blocks, archives with passages (and one passage of a kept archive), an agent's own passages,
conversations, scheduled messages, folders, and a second agent.

With ``detaches`` on too, after the deletes the client detaches from its agent one block and
one tool it did not delete. A detach is judged like a delete on the agent's own views (its
block and tool lists, its state), and as nothing at all everywhere else: the block and the
tool stay retrievable and listed. Its first attempt must not answer 404 either.

:mod:`._agent_deletes_checks` judges the log (``deletes_are_total``): a thing whose delete the
server acknowledged is gone from its retrieve (404) and from every list and agent that showed
it (an archive's passages go with it), and a thing never deleted is still everywhere it was.
A delete retried after an attempt whose outcome was lost may find the thing gone (404); a
delete's *first* attempt finding its thing gone is a problem (nobody else deletes them). Last,
each delete is sent once more: what is gone must be a 404, not a 2xx.

With ``deletes_at_once`` too (apiV, session 25), each thing is also retrieved right after its
delete was acknowledged, before anything else is sent: an acknowledged delete is gone at once
(a 404), not once work the server left for later has run (round ``right after its delete``).
"""

from __future__ import annotations

from typing import Any

import letta_client
import trio

from .._public import current_simulation
from ._agent_deletes_checks import DeletesLog
from ._agent_deletes_repeat import repeat_rounds
from ._agent_readback import _items
from ._agent_walker import SdkWalker, sdk_method

__all__ = ["MARK", "DeleteWalker"]

MARK = "mark-a907"
"""The delete walker's marker (``_agent_prompt.AGENT_MARK``); no planned agent has number 907."""
AGENTS = ("deletes-agent-0", "deletes-agent-1")
FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01: never due during a run
MADE = 3  # of each kind (archives: 2)
LATER = 5.0  # virtual seconds between the two read-backs
RETRIEVE = {  # kind -> the route that retrieves one (deletes_at_once)
    "tool": "tools.retrieve",
    "block": "blocks.retrieve",
    "archive": "archives.retrieve",
    "conversation": "conversations.retrieve",
    "schedule": "agents.schedule.retrieve",
    "folder": "folders.retrieve",
    "agent": "agents.retrieve",
}


def _tool(n: int) -> str:
    return f'''def del_probe_{n}(note: str) -> str:
    """Probe deletes, number {n}.

    Args:
        note: what to note

    Returns:
        str: the note
    """
    return note
'''


class DeleteWalker(SdkWalker):
    """Makes, deletes one of each kind, reads back (see the module docstring)."""

    PREFIX = "deletes"

    def __init__(
        self,
        clients: Any,
        rng: Any,
        *,
        detaches: bool = False,
        at_once: bool = False,
        repeats: int = 0,
    ) -> None:
        super().__init__(clients, rng)
        self.detaches = detaches
        self.at_once = at_once  # param deletes_at_once: each retrieved right after its delete
        self.repeats = repeats  # param deletes_repeat: rounds of _agent_deletes_repeat
        self.log = DeletesLog()
        self.problems = self.log.problems
        self.agent = ""  # the agent everything attaches to
        self.other = ""  # the agent that is deleted
        self.archive_passages: dict[str, list[str]] = {}  # archive -> its passages
        self.plan: list[tuple[str, str, str, dict[str, str]]] = []  # the deletes, in order

    async def run(self) -> None:
        await self._phases(
            (
                self._agents,
                self._tools,
                self._blocks,
                self._passages,  # before any archive is attached: inserts then go to the
                self._archives,  # agent's first attached archive (as in Letta)
                self._conversations,
                self._schedules,
                self._folders,
                self._repeats,
                self._deletes,
                self._detaches,
                self._read_back,
                self._later,
                self._again,
            ),
            lambda phase: phase == self._agents or bool(self.agent and self.other),
        )

    # -- shared -------------------------------------------------------------------------------
    def _made(self, kind: str, made_id: Any) -> str:
        made = str(made_id)
        self.log.made.setdefault(kind, []).append(made)
        return made

    async def _exists(self, route: str, kind: str, thing: str, *args: Any, **kw: Any) -> None:
        """Is ``thing`` there by ``route`` (``sdk.<route>(*args)``)? 404 says no."""

        async def attempt(sdk: Any, _: int) -> bool:
            try:
                await sdk_method(sdk, route)(*args, **kw)
            except letta_client.NotFoundError:
                return False
            return True

        found = await self._call(route, attempt)
        self.log.retrieved.append((f"{self.log.round}: {route}({thing})", kind, thing, found))

    def _listed(self, route: str, kind: str, shown: list[str], universe: list[str]) -> None:
        self.log.listed.append((f"{self.log.round}: {route}", kind, shown, list(universe)))

    async def _delete(self, kind: str, thing: str, route: str, **kw: str) -> None:
        """Deleted once: a retry may find it gone (an earlier attempt landed); the first
        attempt must not."""

        async def attempt(sdk: Any, number: int) -> None:
            try:
                await sdk_method(sdk, route)(thing, **kw)
            except letta_client.NotFoundError:
                if number == 1:
                    raise
                self.log.regone.append(f"{route}({thing})")

        await self._call(f"{route} {thing}", attempt)
        self.log.deleted.setdefault(kind, []).append(thing)
        if self.at_once and kind in RETRIEVE:
            extra = {"agent_id": self.agent} if kind == "schedule" else {}
            was, self.log.round = self.log.round, "right after its delete"
            await self._exists(RETRIEVE[kind], kind, thing, thing, **extra)
            self.log.round = was

    # -- making -------------------------------------------------------------------------------
    async def _agents(self) -> None:
        ids = []
        for name in AGENTS:

            async def find(sdk: Any, name: str = name) -> Any:
                page = await sdk.agents.list(name=name, limit=1, order="asc")
                return page.items[0] if page.items else None

            async def make(sdk: Any, name: str = name) -> Any:
                return await sdk.agents.create(
                    name=name,
                    include_base_tools=False,
                    memory_blocks=[
                        {"label": "human", "value": f"The delete walker ({MARK}).", "limit": 4000}
                    ],
                )

            made = await self._create(f"agent {name}", find, make)
            ids.append(self._made("agent", made.id))
        self.agent, self.other = ids

    async def _tools(self) -> None:
        for n in range(MADE):
            name = f"del_probe_{n}"

            async def find(sdk: Any, name: str = name) -> Any:
                page = await sdk.tools.list(name=name, limit=1)
                return page.items[0] if page.items else None

            async def make(sdk: Any, n: int = n) -> Any:
                return await sdk.tools.create(source_code=_tool(n), tags=["del-tool"])

            made = await self._create(f"tool {name}", find, make)
            tool_id = self._made("tool", made.id)
            await self._sdk("agents.tools.attach", tool_id, agent_id=self.agent)

    async def _blocks(self) -> None:
        for n in range(MADE):
            label = f"delblock{n}"

            async def find(sdk: Any, label: str = label) -> Any:
                got = _items(await sdk.blocks.list(label=label, limit=10))
                return got[0] if got else None

            async def make(sdk: Any, label: str = label) -> Any:
                return await sdk.blocks.create(label=label, value=f"{label} ({MARK})", limit=500)

            made = await self._create(f"block {label}", find, make)
            block_id = self._made("block", made.id)
            await self._sdk("agents.blocks.attach", block_id, agent_id=self.agent)

    async def _archives(self) -> None:
        for n in range(2):
            name = f"deletes-archive-{n}"

            async def find(sdk: Any, name: str = name) -> Any:
                page = await sdk.archives.list(name=name, limit=1)
                return page.items[0] if page.items else None

            async def make(sdk: Any, name: str = name) -> Any:
                return await sdk.archives.create(name=name, description="the delete walker's")

            made = await self._create(f"archive {name}", find, make)
            archive_id = self._made("archive", made.id)
            await self._sdk("agents.archives.attach", archive_id, agent_id=self.agent)
            for k in range(2):
                text = f"deletes archive {n} passage {k} ({MARK})"
                passage = await self._passage(text, archive_id)
                self.archive_passages.setdefault(archive_id, []).append(passage)

    async def _passage(self, text: str, archive_id: str | None) -> str:
        agent = self.agent

        async def find(sdk: Any) -> Any:
            got = _items(await sdk.agents.passages.list(agent, search=text, limit=100))
            same = [p for p in got if p.text == text]
            return same[0] if same else None

        async def make(sdk: Any) -> Any:
            if archive_id is None:
                made = await sdk.agents.passages.create(agent, text=text)
                return made[0] if isinstance(made, list) else made
            return await sdk.archives.passages.create(archive_id, text=text)

        made = await self._create(f"passage {text!r}", find, make)
        return self._made("passage", made.id)

    async def _passages(self) -> None:
        for k in range(MADE):
            await self._passage(f"deletes own passage {k} ({MARK})", None)

    async def _conversations(self) -> None:
        for n in range(MADE):
            summary = f"deletes thread {n}"

            async def find(sdk: Any, summary: str = summary) -> Any:
                got = _items(await sdk.conversations.list(agent_id=self.agent, limit=100))
                same = [c for c in got if c.summary == summary]
                return same[0] if same else None

            async def make(sdk: Any, summary: str = summary) -> Any:
                return await sdk.conversations.create(agent_id=self.agent, summary=summary)

            made = await self._create(f"conversation {summary!r}", find, make)
            self._made("conversation", made.id)

    async def _schedules(self) -> None:
        for n in range(MADE):
            text = f"deletes schedule {n} ({MARK})"
            at = FAR_FUTURE_MS + (n + 1) * 60_000 + self.rng.randint(0, 999)

            async def find(sdk: Any, text: str = text) -> Any:
                got = await sdk.agents.schedule.list(self.agent)
                for s in got.scheduled_messages:
                    if any(m.content == text for m in s.message.messages):
                        return s
                return None

            async def make(sdk: Any, text: str = text, at: int = at) -> Any:
                return await sdk.agents.schedule.create(
                    self.agent,
                    messages=[{"role": "user", "content": text}],
                    schedule={"type": "one-time", "scheduled_at": at},
                )

            made = await self._create(f"schedule {n}", find, make)
            self._made("schedule", made.id)

    async def _folders(self) -> None:
        for n in range(MADE):
            name = f"deletes-folder-{n}"

            async def find(sdk: Any, name: str = name) -> Any:
                got = _items(await sdk.folders.list(name=name, limit=1))
                return got[0] if got else None

            async def make(sdk: Any, name: str = name) -> Any:
                return await sdk.folders.create(name=name)

            made = await self._create(f"folder {name}", find, make)
            folder_id = self._made("folder", made.id)
            await self._sdk("agents.folders.attach", folder_id, agent_id=self.agent)

    def _on_agent(self, kind: str) -> str:
        """The kind an agent's own view of ``kind`` is judged as: with ``detaches``, what was
        detached is gone from it as what was deleted is (``check_deletes``)."""
        return f"agent {kind}" if self.detaches and kind in ("block", "tool") else kind

    # -- deleting -----------------------------------------------------------------------------
    def _victim(self, kind: str, among: list[str] | None = None) -> str:
        return str(self.rng.choice(among if among is not None else self.log.made[kind]))

    async def _repeats(self) -> None:
        """With ``deletes_repeat``: rounds of detaches and an agent's delete (its module)."""
        if self.repeats:
            await repeat_rounds(self, self.repeats)

    async def _deletes(self) -> None:
        """One of each kind, in a random order (a passage of a kept archive too)."""
        gone_archive = self._victim("archive")
        kept_archive = next(a for a in self.log.made["archive"] if a != gone_archive)
        own = [
            p
            for p in self.log.made["passage"]
            if not any(p in ps for ps in self.archive_passages.values())
        ]
        plan: list[tuple[str, str, str, dict[str, str]]] = []
        for kind, route in (
            ("tool", "tools.delete"),
            ("block", "blocks.delete"),
            ("conversation", "conversations.delete"),
            ("folder", "folders.delete"),
        ):
            thing = self._victim(kind)
            plan.append((kind, thing, route, {}))
        schedule = self._victim("schedule")
        plan.append(("schedule", schedule, "agents.schedule.delete", {"agent_id": self.agent}))
        passage = self._victim("passage", own)
        plan.append(("passage", passage, "agents.passages.delete", {"agent_id": self.agent}))
        archived = self._victim("passage", self.archive_passages[kept_archive])
        plan.append(("passage", archived, "archives.passages.delete", {"archive_id": kept_archive}))
        plan.append(("archive", gone_archive, "archives.delete", {}))
        plan.append(("agent", self.other, "agents.delete", {}))
        self.rng.shuffle(plan)
        self.plan = plan
        for kind, thing, route, kw in plan:
            await self._delete(kind, thing, route, **kw)
            if route == "archives.delete":  # its passages go with it
                for p in self.archive_passages[thing]:
                    self.log.deleted.setdefault("passage", []).append(p)

    async def _detaches(self) -> None:
        """With ``detaches``: one block and one tool the client did not delete, detached from
        its agent. On the agent's views they count as deleted (kind ``agent <kind>``)."""
        if not self.detaches:
            return
        for kind, route in (("block", "agents.blocks.detach"), ("tool", "agents.tools.detach")):
            kept = [t for t in self.log.made[kind] if t not in self.log.deleted.get(kind, [])]
            thing = self._victim(kind, kept)
            await self._delete(f"agent {kind}", thing, route, agent_id=self.agent)

    async def _again(self) -> None:
        """Each delete sent once more: what is gone answers 404 (Letta's contract), not 2xx."""
        for kind, thing, route, kw in self.plan:

            async def attempt(
                sdk: Any, _: int, route: str = route, thing: str = thing, kw: Any = kw
            ) -> bool:
                try:
                    await sdk_method(sdk, route)(thing, **kw)
                except letta_client.NotFoundError:
                    return True
                return False

            before = _faults_fired()
            answered_404 = await self._call(f"{route} {thing} again", attempt)
            faulted = _faults_fired() != before
            self.log.again.append((f"{route}({thing}) again", kind, thing, answered_404, faulted))

    # -- reading back -------------------------------------------------------------------------
    async def _later(self) -> None:
        await trio.sleep(LATER)
        self.log.round = "later"
        await self._read_back()

    async def _read_back(self) -> None:
        made, agent = self.log.made, self.agent
        for tool in made["tool"]:
            await self._exists("tools.retrieve", "tool", tool, tool)
        for block in made["block"]:
            await self._exists("blocks.retrieve", "block", block, block)
        for archive in made["archive"]:
            await self._exists("archives.retrieve", "archive", archive, archive)
        for conv in made["conversation"]:
            await self._exists("conversations.retrieve", "conversation", conv, conv)
        for schedule in made["schedule"]:
            await self._exists(
                "agents.schedule.retrieve", "schedule", schedule, schedule, agent_id=agent
            )
        for folder in made["folder"]:
            await self._exists("folders.retrieve", "folder", folder, folder)
        for other in made["agent"]:
            await self._exists("agents.retrieve", "agent", other, other)

        def ids(got: Any) -> list[str]:
            return [str(x.id) for x in _items(got)]

        self._listed(
            "tools.list", "tool", ids(await self._sdk("tools.list", limit=1000)), made["tool"]
        )
        self._listed(
            "blocks.list", "block", ids(await self._sdk("blocks.list", limit=1000)), made["block"]
        )
        archives = await self._sdk("archives.list", limit=1000)
        self._listed("archives.list", "archive", ids(archives), made["archive"])
        mine = await self._sdk("archives.list", agent_id=agent, limit=1000)
        self._listed(f"archives.list(agent_id={agent})", "archive", ids(mine), made["archive"])
        folders = await self._sdk("folders.list", limit=1000)
        self._listed("folders.list", "folder", ids(folders), made["folder"])
        named = await self._sdk("agents.list", name=AGENTS[1], limit=10)
        self._listed(f"agents.list(name={AGENTS[1]})", "agent", ids(named), [self.other])

        for kind, route in (
            ("tool", "agents.tools.list"),
            ("block", "agents.blocks.list"),
            ("folder", "agents.folders.list"),
        ):
            shown = ids(await self._sdk(route, agent, limit=100))
            self._listed(f"{route}({agent})", self._on_agent(kind), shown, made[kind])
        convs = ids(await self._sdk("conversations.list", agent_id=agent, limit=100))
        route = f"conversations.list(agent_id={agent})"
        self._listed(route, "conversation", convs, made["conversation"])
        schedules = await self._sdk("agents.schedule.list", agent)
        shown = [str(s.id) for s in schedules.scheduled_messages]
        self._listed(f"agents.schedule.list({agent})", "schedule", shown, made["schedule"])
        passages = await self._sdk("agents.passages.list", agent, limit=1000)
        self._listed(f"agents.passages.list({agent})", "passage", ids(passages), made["passage"])

        state = await self._sdk("agents.retrieve", agent)
        where = f"agents.retrieve({agent})"
        tools = [str(t.id) for t in state.tools]
        self._listed(f"{where}.tools", self._on_agent("tool"), tools, made["tool"])
        blocks = [str(b.id) for b in state.memory.blocks]
        self._listed(f"{where}.memory.blocks", self._on_agent("block"), blocks, made["block"])
        sources = [str(s.id) for s in state.sources]
        self._listed(f"{where}.sources", "folder", sources, made["folder"])


def _faults_fired() -> int:
    """Faults fired so far in this run, latency aside: one of them during a request may leave
    its outcome unknown to the server, which then settles a retry by what it finds."""
    sim = current_simulation()
    if sim is None:
        return 0
    return sum(n for name, n in sim.faults.fired.items() if not name.endswith(".latency"))
