"""The shared catalog, agent files and message search, through the real SDK (``catalog``).

With ``catalog`` on, once the agents' clients are done (the faults go on), one more client,
on random nodes, hopping after failures, drives what the other walkers leave alone and logs
what it read for :func:`._agent_catalog_checks.check_catalog` (``catalog_contract``):

1. **Agents of its own**: a custom tool ``cat_probe`` (upserted), an agent ``catalog-src``
   with blocks (one read-only, with a limit, a description and metadata; one with no limit)
   and tool rules, and a bare agent ``catalog-x``; a standalone block made with no limit.
   None of them is ever sent a message, so no other oracle sees them.
2. **Agent file**: the source is exported; the client writes its own document from it (the
   tool made approval-only with a ``return_char_limit``, a folder with a file open at a
   window of lines, a history of user and assistant messages), imports it under a name of its
   own, waits for the file to be processed, and exports the copy.
3. **Search**: the copy's history is searched with ``search_mode="fts"``, with room to spare
   and with a limit that cuts the hits.
4. **Archives**: three archives, two attached to the source; the archives list read in one
   page both ways, walked in pages by ``after`` and ``before`` cursors both ways, and by
   ``agent_id`` and ``name``.
5. **Shared lists**: a folder and a standalone block attached to three agents; the folder's
   agents and the block's agents read and walked as the archives are.
6. **Scheduled messages**: four one-time schedules far in the future on ``catalog-x`` (they
   never fire during the run), listed unpaged and walked ``limit`` at a time.
7. **Tools**: ``tools.list(search=...)`` with a part of ``cat_probe``'s name in capitals.

Every create is retry-safe (looked up by its name, label or message before a retry); an
attach is idempotent. A request that fails with an error the client must not retry is a
problem (``every_request_completed`` records it too).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import trio

from ._agent_catalog_checks import CatalogLog, ScheduleWalk, SearchSeen
from ._agent_lists import Walk, walk
from ._agent_walker import SdkWalker

__all__ = ["CatalogWalker"]

SOURCE = "catalog-src"
COPY = "catalog-copy"
BARE = "catalog-x"
TOOL_SOURCE = '''def cat_probe(note: str) -> str:
    """Probe the catalog.

    Args:
        note: what to note

    Returns:
        str: the note
    """
    return note
'''


def add_history(agent: dict[str, Any], history: Sequence[tuple[str, str]], prefix: str) -> None:
    """Append ``history`` ((role, text) pairs, ids ``<prefix><n>``, a second apart) to an
    agent file's agent, all of it in context."""
    messages = list(agent.get("messages") or [])
    for n, (role, words) in enumerate(history):
        messages.append(
            {
                "id": f"{prefix}{n}",
                "role": role,
                "content": [{"type": "text", "text": words}],
                "created_at": f"2026-01-01T00:00:{n + 1:02d}+00:00",
            }
        )
    agent["messages"] = messages
    agent["in_context_message_ids"] = [m["id"] for m in messages]


# The history the client writes into its agent file (plain lowercase words, searched below).
HISTORY = (
    ("user", "the pelican watched a lagoon at dawn"),
    ("assistant", "driftwood lies along the lagoon shore"),
    ("user", "pelican driftwood lagoon heron all four"),
    ("assistant", "nothing in this one matches"),
    ("user", "a heron stood in the reeds"),
    ("assistant", "the pelican and the heron share the lagoon"),
)
QUERY = "pelican lagoon driftwood heron"
# With ``defaults`` (param ``catalog_defaults``): more of that history, so that more messages
# match the query than a short default page holds, and more schedules than one digit counts.
MORE_HISTORY = tuple(
    (role, f"{word} entry {name} of the logbook")
    for name in ("one", "two", "three", "four", "five", "six")
    for role, word in (("user", "heron"), ("assistant", "pelican"))
)
DEFAULT_SEARCH_LIMIT = 50  # Letta's messages.search without a limit
ARCHIVES = 3
SCHEDULES = 4
MORE_SCHEDULES = 12
FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01: never due during a run
FILE_LINES = 24
PATCHES = 4
PATCH_CHOICES: dict[str, tuple[Any, ...]] = {
    "value": ("the keeper of lists", "keeper of pages"),
    "description": ("lists and pages", "who keeps the catalog"),
    "metadata": ({"kind": "keeper"}, {"n": 3}),
    "limit": (4000, 5000),
}


class CatalogWalker(SdkWalker):
    """Drives the catalog areas and logs what it read (see the module docstring)."""

    PREFIX = "catalog"

    def __init__(self, clients: Any, rng: Any, defaults: bool = False) -> None:
        super().__init__(clients, rng)
        self.defaults = defaults  # also the documented defaults: a search with no limit, and
        # schedule pages of 10 over 12 schedules (param catalog_defaults)
        self.log = CatalogLog()
        self.problems = self.log.problems
        self.tool: str | None = None
        self.source: str | None = None
        self.bare: str | None = None
        self.copy: str | None = None

    async def run(self) -> None:
        await self._phases(
            (
                self._agents,
                self._agent_file,
                self._block_patches,
                self._search,
                self._archives,
                self._shared_lists,
                self._schedules,
                self._tools,
            ),
            lambda phase: phase == self._agents or self.source is not None,
        )

    # -- 1. agents, a tool, a block ----------------------------------------------------------
    async def _agent_named(self, name: str, **fields: Any) -> str:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=name, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(name=name, include_base_tools=False, **fields)

        made = await self._create(f"agent {name}", find, make)
        return str(made.id)

    async def _agents(self) -> None:
        tool = await self._sdk("tools.upsert", source_code=TOOL_SOURCE, tags=["cat"])
        self.tool = str(tool.id)
        self.source = await self._agent_named(
            SOURCE,
            memory_blocks=[
                {
                    "label": "human",
                    "value": "kelp farmer",
                    "limit": len("kelp farmer"),  # exactly at its limit: must be accepted
                    "read_only": True,
                    "description": "who talks",
                    "metadata": {"shelf": 1},
                },
                {
                    "label": "persona",
                    "value": "a catalog keeper",
                    "description": "the keeper",
                    "metadata": {"kind": "persona"},
                },
            ],
            tool_ids=[self.tool],
            tool_rules=[
                {"type": "max_count_per_step", "tool_name": "cat_probe", "max_count_limit": 2},
                {"type": "run_first", "tool_name": "cat_probe"},
            ],
            tags=["cat"],
            description="the catalog walk's source",
        )
        self.bare = await self._agent_named(BARE)
        state = await self._sdk("agents.retrieve", self.source)
        for b in state.memory.blocks if state.memory else ():
            if b.label == "persona":
                self.log.block_limits.append(("memory_blocks persona (no limit)", int(b.limit)))
        label = "cat-loose"

        async def find(sdk: Any) -> Any:
            page = await sdk.blocks.list(label=label, limit=1, order="asc")
            return page.items[0] if page.items else None

        made = await self._create(
            f"block {label}", find, lambda sdk: sdk.blocks.create(label=label, value="loose")
        )
        self.log.block_limits.append(("blocks.create (no limit) answered", int(made.limit)))
        seen = await self._sdk("blocks.retrieve", made.id)
        self.log.block_limits.append(("blocks.retrieve of it", int(seen.limit)))

    # -- 2. an agent file the client writes --------------------------------------------------
    def _document(self, exported: Any) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(
            exported if isinstance(exported, str) else json.dumps(exported)
        )
        [agent] = document["agents"]
        for tool in document.get("tools") or ():
            if tool.get("name") == "cat_probe":
                tool["default_requires_approval"] = True
                tool["return_char_limit"] = 777
                tool["metadata_"] = {"shelf": "tools"}  # Letta's tool metadata, kept on import
        start = int(self.rng.randint(2, 8))
        end = start + int(self.rng.randint(2, 6))
        text = "\n".join(f"tide table row {n}" for n in range(1, FILE_LINES + 1))
        document["sources"] = [
            {
                "id": "source-0",
                "name": "cat-docs",
                "description": "tide tables",
                "instructions": "read them",
                "metadata": {"shelf": 3},
            }
        ]
        document["files"] = [
            {
                "id": "file-0",
                "source_id": "source-0",
                "file_name": "tides.txt",
                "file_type": "text/plain",
                "content": text,
            }
        ]
        agent["source_ids"] = ["source-0"]
        agent["files_agents"] = [
            {
                "id": "file_agent-0",
                "agent_id": agent["id"],
                "file_id": "file-0",
                "source_id": "source-0",
                "is_open": True,
                "start_line": start,
                "end_line": end,
            }
        ]
        add_history(agent, HISTORY + (MORE_HISTORY if self.defaults else ()), "message-w")
        return document

    async def _agent_file(self) -> None:
        exported = await self._sdk("agents.export_file", self.source)
        document = self._document(exported)
        raw = json.dumps(document).encode()

        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=COPY, limit=1, order="asc")
            return page.items[0].id if page.items else None

        answered: list[str] = []  # the import answered (not only found after a retry)

        async def make(sdk: Any) -> Any:
            got = await sdk.agents.import_file(file=("catalog.af", raw), name=COPY)
            answered.append("yes")
            return got.agent_ids[0] if got.agent_ids else None

        copy = await self._create("agents.import_file", find, make)
        if copy is None:
            self.log.problems.append("agents.import_file answered no agent id")
            return
        self.copy = str(copy)
        for _ in range(60):  # the file's text is exported once it is processed
            raw_again = await self._sdk("agents.export_file", self.copy)
            again = json.loads(raw_again) if isinstance(raw_again, str) else dict(raw_again)
            if all(f.get("processing_status") == "completed" for f in again.get("files") or ()):
                break
            await trio.sleep(1)
        what = "import then export"
        self.log.round_trips.append((what, document, again, COPY))
        if not answered:  # cut mid-way and found by name: it may lack what follows the create
            self.log.unsure.append(what)

    # -- 2b. PATCHes of an agent's block -----------------------------------------------------
    async def _block_patches(self) -> None:
        """Four ``PATCH /v1/agents/{id}/core-memory/blocks/persona``, each a random non-empty
        subset of the fields; the answer and a read after it are held to the model (the
        fields given changed, the others kept)."""
        state = await self._sdk("agents.blocks.retrieve", "persona", agent_id=self.source)
        model = _block_fields(state)
        names = sorted(PATCH_CHOICES)
        for k in range(PATCHES):
            chosen = sorted(self.rng.sample(names, int(self.rng.choice((1, 1, 2)))))
            changes = {name: self.rng.choice(PATCH_CHOICES[name]) for name in chosen}
            answer = await self._sdk(
                "agents.blocks.update", "persona", agent_id=self.source, **changes
            )
            model.update(changes)
            shown = ", ".join(f"{n}={v!r}" for n, v in changes.items())
            self.log.patches.append(
                (
                    f"agents.blocks.update(persona, {shown}) answered",
                    _block_fields(answer),
                    dict(model),
                )
            )
            seen = await self._sdk("agents.blocks.retrieve", "persona", agent_id=self.source)
            self.log.patches.append(
                (
                    f"agents.blocks.retrieve(persona) after update {k + 1}",
                    _block_fields(seen),
                    dict(model),
                )
            )

    # -- 3. search ---------------------------------------------------------------------------
    async def _search(self) -> None:
        if self.copy is None:
            return
        page = await self._sdk("agents.messages.list", self.copy, limit=1000, order="asc")
        written = tuple(
            (str(m.id), str(m.content))
            for m in page.items
            if m.message_type in ("user_message", "assistant_message")
            and isinstance(getattr(m, "content", None), str)
        )
        for limit in (10, int(self.rng.choice((1, 2, 3)))):
            hits = await self._sdk(
                "messages.search",
                query=QUERY,
                search_mode="fts",
                agent_id=self.copy,
                limit=limit,
            )
            seen = tuple((str(h.message_id), str(h.content or h.reasoning or "")) for h in hits)
            self.log.searches.append(SearchSeen(QUERY, limit, seen, written))
        if self.defaults:  # no limit: Letta's default page
            hits = await self._sdk(
                "messages.search", query=QUERY, search_mode="fts", agent_id=self.copy
            )
            seen = tuple((str(h.message_id), str(h.content or h.reasoning or "")) for h in hits)
            self.log.searches.append(SearchSeen(QUERY, DEFAULT_SEARCH_LIMIT, seen, written))

    # -- walks -------------------------------------------------------------------------------
    async def _walks(
        self, what: str, fetch: Callable[[Any, str, str | None, str | None, int], Awaitable[Any]]
    ) -> None:
        """The one-page references (both orders) and four walks of ``what``."""

        async def page(order: str, after: str | None, before: str | None, limit: int) -> Any:
            async def attempt(sdk: Any, _: int) -> Any:
                return await fetch(sdk, order, after, before, limit)

            return await self._call(f"{what} page", attempt)

        asc = await page("asc", None, None, 1000)
        desc = await page("desc", None, None, 1000)
        self.log.references[what] = tuple(item[0] for item in asc)
        self.log.references_desc[what] = tuple(item[0] for item in desc)
        if asc and asc[0][2] is not None:
            self.log.stamps[what] = tuple((item[2], item[0]) for item in asc)
        walks: list[Walk] = []
        for order in ("asc", "desc"):
            items = asc if order == "asc" else desc
            for cursor in ("after", "before"):
                size = int(self.rng.choice((1, 2)))
                last = items[-1][0] if items else None
                walks.append(await walk(page, order, cursor, size, last))
        self.log.walks.append((what, walks))

    # -- 4. archives -------------------------------------------------------------------------
    async def _archives(self) -> None:
        made: list[str] = []
        for n in range(ARCHIVES):
            name = f"cat-arch-{n}"

            async def find(sdk: Any, name: str = name) -> Any:
                page = await sdk.archives.list(name=name, limit=1)
                return page.items[0] if page.items else None

            async def make(sdk: Any, name: str = name) -> Any:
                return await sdk.archives.create(name=name, description=f"archive {name}")

            archive = await self._create(f"archive {name}", find, make)
            made.append(str(archive.id))
        attached = [made[0], made[-1]]
        for archive_id in attached:
            await self._sdk("agents.archives.attach", archive_id, agent_id=self.source)

        async def fetch(
            sdk: Any, order: str, after: str | None, before: str | None, limit: int
        ) -> Any:
            cursors = {k: v for k, v in (("after", after), ("before", before)) if v is not None}
            got = await sdk.archives.list(order=order, limit=limit, **cursors)
            return [(str(a.id), str(a.name), _stamp(a.created_at)) for a in got.items]

        await self._walks("archives", fetch)
        page = await self._sdk("archives.list", agent_id=self.source, limit=1000)
        listed = tuple(str(a.id) for a in page.items)
        self.log.members.append((f"archives.list(agent_id={self.source})", listed, tuple(attached)))
        name = f"cat-arch-{ARCHIVES - 2}"
        page = await self._sdk("archives.list", name=name, limit=1000)
        listed = tuple(str(a.id) for a in page.items)
        self.log.members.append((f"archives.list(name={name})", listed, (made[-2],)))

    # -- 5. a folder's agents, a block's agents ------------------------------------------------
    async def _shared_lists(self) -> None:
        agents = [a for a in (self.source, self.bare, self.copy) if a is not None]
        name = "cat-shared"

        async def find_folder(sdk: Any) -> Any:
            page = await sdk.folders.list(name=name, limit=1)
            items = page if isinstance(page, list) else page.items
            return items[0] if items else None

        folder = await self._create(
            f"folder {name}", find_folder, lambda sdk: sdk.folders.create(name=name)
        )

        async def find_block(sdk: Any) -> Any:
            page = await sdk.blocks.list(label=name, limit=1, order="asc")
            return page.items[0] if page.items else None

        block = await self._create(
            f"block {name}",
            find_block,
            lambda sdk: sdk.blocks.create(label=name, value="shared", limit=100),
        )
        for agent in agents:
            await self._sdk("agents.folders.attach", folder.id, agent_id=agent)
            await self._sdk("agents.blocks.attach", block.id, agent_id=agent)

        async def folder_agents(
            sdk: Any, order: str, after: str | None, before: str | None, limit: int
        ) -> Any:
            cursors = {k: v for k, v in (("after", after), ("before", before)) if v is not None}
            got = await sdk.folders.agents.list(folder.id, order=order, limit=limit, **cursors)
            items = got if isinstance(got, list) else got.items
            return [(str(i), str(i), None) for i in items]

        async def block_agents(
            sdk: Any, order: str, after: str | None, before: str | None, limit: int
        ) -> Any:
            cursors = {k: v for k, v in (("after", after), ("before", before)) if v is not None}
            got = await sdk.blocks.agents.list(block.id, order=order, limit=limit, **cursors)
            return [(str(a.id), str(a.name), None) for a in got.items]

        for what, fetch in (
            (f"folders.agents.list({folder.id})", folder_agents),
            (f"blocks.agents.list({block.id})", block_agents),
        ):
            await self._walks(what, fetch)
            self.log.members.append((what, self.log.references[what], tuple(agents)))

    # -- 6. scheduled messages ---------------------------------------------------------------
    async def _schedules(self) -> None:
        agent = self.bare
        made: list[str] = []
        count = MORE_SCHEDULES if self.defaults else SCHEDULES
        for n in range(count):
            text = f"catalog schedule {n}"

            async def find(sdk: Any, text: str = text) -> Any:
                got = await sdk.agents.schedule.list(agent)
                for s in got.scheduled_messages:
                    if any(m.content == text for m in s.message.messages):
                        return s
                return None

            async def make(sdk: Any, text: str = text, n: int = n) -> Any:
                return await sdk.agents.schedule.create(
                    agent,
                    messages=[{"role": "user", "content": text}],
                    schedule={"type": "one-time", "scheduled_at": FAR_FUTURE_MS + n * 60_000},
                )

            made.append(str((await self._create(f"schedule {n}", find, make)).id))
        self.log.schedules_made = tuple(made)
        whole = await self._sdk("agents.schedule.list", agent)
        self.log.schedules_ref = tuple(str(s.id) for s in whole.scheduled_messages)
        limits = {1, 2, int(self.rng.choice((3, 4)))} | ({10} if self.defaults else set())
        for limit in sorted(limits):
            pages: list[tuple[tuple[str, ...], bool]] = []
            after: str | None = None
            for _ in range(count + 3):
                cursors = {"after": after} if after is not None else {}
                got = await self._sdk("agents.schedule.list", agent, limit=str(limit), **cursors)
                ids = tuple(str(s.id) for s in got.scheduled_messages)
                pages.append((ids, bool(got.has_next_page)))
                if not got.has_next_page or not ids:
                    break
                after = ids[-1]
            self.log.schedule_walks.append(ScheduleWalk(limit, tuple(pages)))

    # -- 7. tools ----------------------------------------------------------------------------
    async def _tools(self) -> None:
        if self.tool is None:
            return
        for needle in ("AT_PRO", "probe"):
            page = await self._sdk("tools.list", search=needle, limit=1000)
            listed = tuple(str(t.id) for t in page.items)
            self.log.contains.append((f"tools.list(search={needle!r})", listed, self.tool))


def _block_fields(block: Any) -> dict[str, Any]:
    return {
        "label": block.label,
        "value": block.value,
        "limit": block.limit,
        "description": block.description or "",
        "read_only": bool(block.read_only),
        "metadata": dict(block.metadata or {}),
    }


def _stamp(value: Any) -> float | None:
    """Epoch seconds of a ``created_at`` the SDK gives as a datetime or an ISO string."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    stamp: float = value.timestamp()
    return stamp
