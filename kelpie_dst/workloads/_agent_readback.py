"""What one client made and changed, read back through every route that shows it
(``readback``, via HTTP).

With ``readback`` on, once the agents' clients are done (the faults go on), one more client,
on random nodes, hopping after failures, makes things of its own and changes them, keeping a
model of what it set; then reads each back through every route that shows it, and reads every
list they are in every documented way. :mod:`._agent_readback_checks` judges the log
(``readback_consistent``):

1. **Agents**: two agents of its own (no tools; marker ``mark-a906``), with tags.
2. **Archival memory**: passages with tags stored in the first agent; read back in the insert
   answers, the archival list (both orders, walked by ``after`` and ``before`` cursors, by a
   ``search`` substring with a limit), the archival search (by tag, ``any`` and ``all``) and the
   cross-agent passage search.
3. **Archives**: three archives, two attached to the first agent, PATCHed (description, name);
   read back by retrieve, the list both ways and walked, and by ``agent_id`` and ``name`` with
   small limits.
4. **Identities**: two, provisioned on the database (letta-client cannot make one), attached
   to the agents over REST and one detached again; read back in the attach and detach answers,
   ``agents.retrieve`` and ``agents.list(identity_id=...)``.
5. **Tags**: the tag list both ways and walked, filtered by ``name`` and ``query_text`` (in
   any case), with ``after`` and ``before`` cursors and small limits.
6. **Scheduled messages**: one-time schedules far in the future (they never fire in a run)
   whose message has a ``name`` and an ``otid``; read back by retrieve and list.
7. **Messages**: sends with an ``otid`` to the first agent, one of them in a conversation (not
   streamed); the answers, the history (both orders, walked) and the runs (listed by agent and
   by conversation, and retrieved).

Every create is retry-safe (looked up by its name or text before a retry); sends carry an
``otid``; attaches and PATCHes are idempotent. A request that fails with an error the client
must not retry is a problem. A list read twice around its walks that changed in between (a
write in flight landed late) is not judged, and says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import trio

from kelpie_agent.agent import IdentityStore

from ..shims import SimKV, open_kv, sim_ports
from ._agent_lists import Walk, walk
from ._agent_readback_checks import Filtered, ReadbackLog, Shown, Stamp
from ._agent_walker import SdkWalker

__all__ = ["MARK", "ReadbackWalker"]

MARK = "mark-a906"
"""The readback agents' marker (``_agent_prompt.AGENT_MARK``); no planned agent has number 906."""
AGENTS = ("readback-agent-0", "readback-agent-1")
AGENT_TAGS = ("rb-kelp", "rb-tide-pool", "rb-reef", "rb-Kelp-Forest", "rb-shore")
PASSAGE_TAGS = ("red", "blue", "green")
WORDS = ("kelp", "tide", "reef", "foam", "shoal", "lagoon", "heron")
FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01: never due during a run
ARCHIVES = 3
TOOL = '''def rb_probe(note: str) -> str:
    """Probe the readback.

    Args:
        note: what to note

    Returns:
        str: the note
    """
    return note
'''
LIMITS = (1, 2, 3, 1000)  # a filter's limit: under, at or over what it keeps

Fetch = Callable[[str, str | None, str | None, int], Awaitable[list[tuple[str, str, Any]]]]


def _items(got: Any) -> list[Any]:
    """A page's items (a bare array, or a page object)."""
    return list(got) if isinstance(got, list) else list(got.items)


def _cursors(after: str | None, before: str | None) -> dict[str, str]:
    return {k: v for k, v in (("after", after), ("before", before)) if v is not None}


class ReadbackWalker(SdkWalker):
    """Makes, changes and reads back (see the module docstring)."""

    PREFIX = "readback"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = ReadbackLog()
        self.problems = self.log.problems
        self.agents: list[str] = []
        self.archives: list[str] = []
        self.attached: list[str] = []
        self.identities: dict[str, set[str]] = {}  # agent -> attached identities (the model)

    async def run(self) -> None:
        await self._phases(
            (
                self._agents,
                self._passages,
                self._archives,
                self._dated,
                self._identities,
                self._tags,
                self._schedules,
                self._tools,
                self._messages,
            ),
            lambda phase: phase == self._agents or len(self.agents) == len(AGENTS),
        )

    # -- shared -------------------------------------------------------------------------------
    def _set(self, key: str, **fields: Any) -> None:
        self.log.model.setdefault(key, {}).update(fields)

    def _show(self, route: str, key: str, **fields: Any) -> None:
        want = self.log.model.get(key)
        self.log.shown.append(Shown(route, key, fields, None if want is None else dict(want)))

    def _stamp(self, route: str, key: str, thing: Any, change: bool = False) -> None:
        """Log the timestamps ``thing`` shows (``check_stamps``)."""
        self.log.stamps.append(
            Stamp(
                route,
                key,
                getattr(thing, "created_at", None),
                getattr(thing, "updated_at", None),
                change,
            )
        )

    def _agent_shown(self, route: str, agent: Any) -> None:
        """An AgentState (an SDK model, or the JSON object an attach answers)."""

        def field(name: str) -> Any:
            return agent.get(name) if isinstance(agent, dict) else getattr(agent, name, None)

        self._show(
            route,
            f"agent:{field('id')}",
            tags=sorted(field("tags") or ()),
            identity_ids=sorted(field("identity_ids") or ()),
        )

    async def _every_way(
        self, what: str, fetch: Fetch, sizes: tuple[int, int] = (1, 3)
    ) -> list[tuple[str, str, Any]] | None:
        """The list in one page both ways and walked four ways; its items oldest first (or
        ``None``: it changed while read, and is not judged)."""

        async def page(
            order: str, after: str | None, before: str | None, limit: int
        ) -> list[tuple[str, str, Any]]:
            return await fetch(order, after, before, limit)

        asc = await page("asc", None, None, 1000)
        desc = await page("desc", None, None, 1000)
        walks: list[Walk] = []
        for order in ("asc", "desc"):
            items = asc if order == "asc" else desc
            for cursor in ("after", "before"):
                size = self.rng.randint(*sizes)
                last = items[-1][0] if items else None
                walks.append(await walk(page, order, cursor, size, last))
        again = await page("asc", None, None, 1000)
        ids = [i[0] for i in asc]
        if [i[0] for i in again] != ids:
            self.log.unsettled.append(what)
            return None
        self.log.orders.append((what, ids, [i[0] for i in desc]))
        self.log.walks.append((what, ids, walks))
        return asc

    # -- 1. agents ----------------------------------------------------------------------------
    async def _agent_named(self, name: str, tags: list[str]) -> Any:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=name, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(
                name=name,
                include_base_tools=False,
                tags=tags,
                memory_blocks=[
                    {"label": "human", "value": f"The readback walker ({MARK}).", "limit": 4000},
                    {"label": "persona", "value": "A terse helper.", "limit": 4000},
                ],
            )

        return await self._create(f"agent {name}", find, make)

    async def _agents(self) -> None:
        for name in AGENTS:
            tags = sorted(self.rng.sample(AGENT_TAGS, self.rng.randint(2, 3)))
            made = await self._agent_named(name, tags)
            self._set(f"agent:{made.id}", tags=tags, identity_ids=[])
            self._agent_shown("agents.create", made)
            self.agents.append(str(made.id))
            self.identities[str(made.id)] = set()
        for agent in self.agents:
            got = await self._sdk("agents.retrieve", agent)
            self._agent_shown("agents.retrieve", got)

    # -- 2. archival memory -------------------------------------------------------------------
    def _passage_shown(self, route: str, passage_id: str, text: str, tags: Any) -> None:
        self._show(route, f"passage:{text}", tags=sorted(tags or ()))

    async def _passages(self) -> None:
        agent = self.agents[0]
        texts: list[str] = []
        once: list[str] = []
        for k in range(self.rng.randint(4, 7)):
            text = f"readback passage {k} {self.rng.choice(WORDS)} {self.rng.choice(WORDS)}"
            tags = sorted(self.rng.sample(PASSAGE_TAGS, self.rng.randint(1, 2)))

            async def find(sdk: Any, text: str = text) -> Any:
                got = _items(await sdk.agents.passages.list(agent, search=text, limit=100))
                same = [p for p in got if p.text == text]
                return same or None

            async def make(sdk: Any, text: str = text, tags: list[str] = tags) -> Any:
                return await sdk.agents.passages.create(agent, text=text, tags=tags)

            made = await self._create(f"passage {k}", find, make)
            self._set(f"passage:{text}", tags=tags)
            texts.append(text)
            if self.created_once:
                once.append(text)
            for p in made if isinstance(made, list) else [made]:
                self._passage_shown("agents.passages.create", str(p.id), str(p.text), p.tags)

        route = f"agents.passages.list({agent})"

        async def fetch(
            order: str, after: str | None, before: str | None, limit: int, **more: Any
        ) -> list[tuple[str, str, Any]]:
            got = _items(
                await self._sdk(
                    "agents.passages.list",
                    agent,
                    ascending=order == "asc",
                    limit=limit,
                    **_cursors(after, before),
                    **more,
                )
            )
            for p in got:
                self._passage_shown(route, str(p.id), str(p.text), p.tags)
            return [(str(p.id), str(p.text), None) for p in got]

        listed = await self._every_way(route, fetch)
        if listed is None:
            return
        self.log.members.append(
            (f"{route}: the texts stored", sorted(texts), sorted({t for _, t, _ in listed}))
        )
        self.log.once.append((f"{route}: the passages", once, [t for _, t, _ in listed]))
        full = [i for i, _, _ in listed]
        text_of = {i: t for i, t, _ in listed}
        for _ in range(2):  # a substring filter with a limit, either order
            word = self.rng.choice(WORDS)
            needle = word.upper() if self.rng.random() < 0.5 else word
            order = self.rng.choice(("asc", "desc"))
            limit = self.rng.choice(LIMITS)
            got = await fetch(order, None, None, limit, search=needle)
            self.log.filtered.append(
                Filtered(
                    f"{route} search={needle!r} {order} limit {limit}",
                    [i for i, _, _ in got],
                    full if order == "asc" else full[::-1],
                    {i for i, t in text_of.items() if word in t.casefold()},
                    limit,
                )
            )
        # the archival search: by tag (any, all), as many as exist
        tags_of = {
            i: self.log.model.get(f"passage:{t}", {}).get("tags", []) for i, t in text_of.items()
        }
        for mode in ("any", "all"):
            chosen = sorted(self.rng.sample(PASSAGE_TAGS, self.rng.randint(1, 2)))
            got = await self._sdk(
                "agents.passages.search",
                agent,
                query=self.rng.choice(WORDS),
                tags=chosen,
                tag_match_mode=mode,
                top_k=100,
            )
            hits = list(got.results)
            what = f"agents.passages.search({agent}, tags={chosen}, {mode})"
            for h in hits:
                self._passage_shown(what, str(h.id), str(h.content), h.tags)
            keep = all if mode == "all" else any
            want = [i for i in full if keep(t in tags_of[i] for t in chosen)]
            self.log.members.append((what, want, [str(h.id) for h in hits]))
        got = await self._sdk(
            "passages.search", query=self.rng.choice(WORDS), agent_id=agent, limit=100
        )
        for item in got:
            self._passage_shown(
                "passages.search", str(item.passage.id), item.passage.text, item.passage.tags
            )
        self.log.members.append(
            (f"passages.search(agent_id={agent})", full, [str(i.passage.id) for i in got])
        )

    # -- 3. archives --------------------------------------------------------------------------
    def _archive_shown(self, route: str, archive: Any) -> None:
        self._show(
            route, f"archive:{archive.id}", name=archive.name, description=archive.description
        )

    async def _archives(self) -> None:
        agent = self.agents[0]
        for n in range(ARCHIVES):
            name, description = f"readback-archive-{n}", f"shelf {n} of the readback walker"

            async def find(sdk: Any, name: str = name) -> Any:
                page = await sdk.archives.list(name=name, limit=1)
                return page.items[0] if page.items else None

            async def make(sdk: Any, name: str = name, description: str = description) -> Any:
                return await sdk.archives.create(name=name, description=description)

            made = await self._create(f"archive {name}", find, make)
            self._set(f"archive:{made.id}", name=name, description=description)
            self._archive_shown("archives.create", made)
            self.archives.append(str(made.id))
        self.attached = [self.archives[0], self.archives[1]]
        for archive_id in self.attached:
            await self._sdk("agents.archives.attach", archive_id, agent_id=agent)
        for n in self.rng.sample(range(ARCHIVES), 2):
            archive_id = self.archives[n]
            changes: dict[str, str] = {
                "description": f"shelf {n}, changed {self.rng.randint(1, 99)}"
            }
            if self.rng.random() < 0.5:
                changes["name"] = f"readback-archive-{n}-renamed"
            if self.rng.random() < 0.3:
                changes = {"name": f"readback-archive-{n}-moved"}
            got = await self._sdk("archives.update", archive_id, **changes)
            self._set(f"archive:{archive_id}", **changes)
            self._archive_shown("archives.update", got)
        for archive_id in self.archives:
            self._archive_shown(
                "archives.retrieve", await self._sdk("archives.retrieve", archive_id)
            )

        async def fetch(
            order: str, after: str | None, before: str | None, limit: int, **more: Any
        ) -> list[tuple[str, str, Any]]:
            got = await self._sdk(
                "archives.list", order=order, limit=limit, **_cursors(after, before), **more
            )
            for a in got.items:
                self._archive_shown("archives.list", a)
            return [(str(a.id), str(a.name), None) for a in got.items]

        listed = await self._every_way("archives.list", fetch)
        if listed is None:
            return
        full = [i for i, _, _ in listed]
        name_of = {i: n for i, n, _ in listed}
        for order in ("asc", "desc"):
            ordered = full if order == "asc" else full[::-1]
            limit = self.rng.randint(1, 2)
            got = await fetch(order, None, None, limit, agent_id=agent)
            self.log.filtered.append(
                Filtered(
                    f"archives.list(agent_id={agent}) {order} limit {limit}",
                    [i for i, _, _ in got],
                    ordered,
                    set(self.attached),
                    limit,
                )
            )
            name = self.rng.choice([name_of[a] for a in self.archives if a in name_of])
            got = await fetch(order, None, None, 1, name=name)
            self.log.filtered.append(
                Filtered(
                    f"archives.list(name={name!r}) {order} limit 1",
                    [i for i, _, _ in got],
                    ordered,
                    {i for i, n in name_of.items() if n == name},
                    1,
                )
            )
        got = await fetch("asc", None, None, 1000, agent_id=agent)
        self.log.members.append(
            (f"archives.list(agent_id={agent})", self.attached, [i for i, _, _ in got])
        )

    # -- 3b. dated passages in a shared archive -----------------------------------------------
    def _moment(self, epoch: float) -> str:
        """``epoch`` as an RFC 3339 date-time in one of the forms a client may send: ``Z``, a
        positive or negative offset, no offset (UTC), a fraction of a second."""
        moment = datetime.fromtimestamp(epoch, tz=UTC)
        form = self.rng.choice(("z", "east", "west", "naive"))
        if form == "east":
            return moment.astimezone(timezone(timedelta(hours=2))).isoformat()
        if form == "west":
            return moment.astimezone(timezone(-timedelta(hours=5, minutes=30))).isoformat()
        if form == "naive":
            return moment.replace(tzinfo=None).isoformat()
        return moment.isoformat().replace("+00:00", "Z")

    async def _dated(self) -> None:
        """The third archive, attached to the second agent, gets a batch of passages with
        explicit ``created_at`` in every form; the second agent's archival list shows each at
        its moment, and a search between two moments keeps exactly those in between (both
        ends inclusive)."""
        agent, archive_id = self.agents[1], self.archives[-1]
        await self._sdk("agents.archives.attach", archive_id, agent_id=agent)
        base = datetime(2025, 1, 2, tzinfo=UTC).timestamp()
        when: dict[str, float] = {}
        body: list[dict[str, Any]] = []
        for k in range(4):
            epoch = base + k * 2 * 86400 + self.rng.randint(0, 86399) + self.rng.choice((0, 0.25))
            text = f"readback dated {k} {self.rng.choice(WORDS)}"
            when[text] = epoch
            self._set(f"passage:{text}", created_at=epoch)
            body.append({"text": text, "created_at": self._moment(epoch)})

        async def find(sdk: Any) -> Any:
            got = _items(await sdk.agents.passages.list(agent, search="readback dated", limit=100))
            return got or None

        async def make(sdk: Any) -> Any:
            return await sdk.archives.passages.create_many(archive_id, passages=body)

        await self._create(f"dated passages of {archive_id}", find, make)
        route = f"agents.passages.list({agent})"
        got = _items(await self._sdk("agents.passages.list", agent, limit=100))
        for p in got:
            self._show(route, f"passage:{p.text}", created_at=p.created_at.timestamp())
        self.log.members.append(  # as sets: a cut first attempt may have stored the batch twice
            (f"{route}: the dated texts", sorted(when), sorted({str(p.text) for p in got}))
        )
        stored = [(str(p.id), str(p.text)) for p in got]
        moments = sorted(when.values())
        for n in range(2):
            low, high = sorted(self.rng.sample(moments, 2))
            start, end = self._moment(low), self._moment(high)
            want = [i for i, t in stored if t in when and low <= when[t] <= high]
            if n == 0:
                hits = await self._sdk(
                    "agents.passages.search",
                    agent,
                    query=self.rng.choice(WORDS),
                    start_datetime=start,
                    end_datetime=end,
                    top_k=100,
                )
                what = f"agents.passages.search({agent}, {start} .. {end})"
                self.log.members.append(
                    (what, sorted(want), sorted(str(h.id) for h in hits.results))
                )
            else:
                found = await self._sdk(
                    "passages.search",
                    query=self.rng.choice(WORDS),
                    agent_id=agent,
                    start_date=start,
                    end_date=end,
                    limit=100,
                )
                what = f"passages.search(agent_id={agent}, {start} .. {end})"
                self.log.members.append(
                    (what, sorted(want), sorted(str(i.passage.id) for i in found))
                )

    # -- 4. identities ------------------------------------------------------------------------
    async def _identity(self, key: str) -> str:
        """An identity made on the database (retried through storage faults; a retry finds
        the one an earlier attempt made)."""
        world = self.clients.world
        main = world.sim.current_node()
        assert main is not None
        store = IdentityStore(SimKV(open_kv(main, host=world.db).store), sim_ports(main))
        failure: Exception | None = None
        for _ in range(40):
            try:
                found = await store.by_key(key)
                if found is not None:
                    return str(found.id)
                return str((await store.create(key, f"Readback {key}")).id)
            except Exception as error:  # a storage fault: try again a moment later
                failure = error
                await trio.sleep(1)
        raise RuntimeError(f"identity {key}: not made: {failure!r}")

    async def _identities(self) -> None:
        made = [await self._identity(f"readback-user-{k}") for k in range(2)]
        plan = [(made[0], self.agents[0]), (made[1], self.agents[0]), (made[0], self.agents[1])]
        for identity, agent in plan:
            got = await self._sdk("agents.identities.attach", identity, agent_id=agent)
            self.identities[agent].add(identity)
            self._set(f"agent:{agent}", identity_ids=sorted(self.identities[agent]))
            self._agent_shown("agents.identities.attach", got)
        gone, agent = made[self.rng.randint(0, 1)], self.agents[0]
        got = await self._sdk("agents.identities.detach", gone, agent_id=agent)
        self.identities[agent].discard(gone)
        self._set(f"agent:{agent}", identity_ids=sorted(self.identities[agent]))
        self._agent_shown("agents.identities.detach", got)
        for agent in self.agents:
            self._agent_shown("agents.retrieve", await self._sdk("agents.retrieve", agent))
        for identity in made:
            page = await self._sdk("agents.list", identity_id=identity, limit=1000)
            want = [a for a in self.agents if identity in self.identities[a]]
            self.log.members.append(
                (f"agents.list(identity_id={identity})", want, [str(a.id) for a in page.items])
            )

    # -- 5. tags ------------------------------------------------------------------------------
    async def _tags(self) -> None:
        async def fetch(
            order: str, after: str | None, before: str | None, limit: int, **more: Any
        ) -> list[tuple[str, str, Any]]:
            got = await self._sdk(
                "tags.list", order=order, limit=limit, **_cursors(after, before), **more
            )
            return [(str(t), str(t), None) for t in got]

        listed = await self._every_way("tags.list", fetch)
        if listed is None:
            return
        full = [t for t, _, _ in listed]
        mine = {t for a in self.agents for t in self.log.model[f"agent:{a}"]["tags"]}
        self.log.members.append(
            ("tags.list: the client's tags", sorted(mine), sorted(t for t in full if t in mine))
        )
        for n in range(4):
            tag = self.rng.choice(sorted(mine))  # a part after "rb-": not every tag has it
            start = self.rng.randint(3, max(3, len(tag) - 2))
            part = tag[start : start + self.rng.randint(2, 4)]
            needle = part.upper() if self.rng.random() < 0.5 else part
            param = "name" if n % 2 == 0 else "query_text"
            order = self.rng.choice(("asc", "desc"))
            ordered = full if order == "asc" else full[::-1]
            limit = self.rng.choice(LIMITS)
            cursor = self.rng.choice(("", "after", "before"))
            at = self.rng.choice(full)
            more: dict[str, str] = {param: needle}
            after = at if cursor == "after" else None
            before = at if cursor == "before" else None
            position = ordered.index(at)
            keep = {t for t in full if part.casefold() in t.casefold()}
            if after is not None:
                keep &= set(ordered[position + 1 :])
            if before is not None:
                keep &= set(ordered[:position])
            got = await fetch(order, after, before, limit, **more)
            self.log.filtered.append(
                Filtered(
                    f"tags.list({param}={needle!r}, {order}, limit {limit}"
                    + (f", {cursor}={at!r}" if cursor else "")
                    + ")",
                    [t for t, _, _ in got],
                    ordered,
                    keep,
                    limit,
                    nearest_end=before is not None,
                )
            )

    # -- 6. scheduled messages ----------------------------------------------------------------
    def _schedule_shown(self, route: str, s: Any) -> None:
        self._show(
            route,
            f"schedule:{s.id}",
            messages=[[m.role, m.content, m.name, m.otid] for m in s.message.messages],
            scheduled_at=getattr(s.schedule, "scheduled_at", None),
            type=s.schedule.type,
        )

    async def _schedules(self) -> None:
        agent = self.agents[1]
        once: list[str] = []
        for n in range(2):
            text = f"readback schedule {n} ({MARK})"
            otid, name = f"readback-schedule-{n}", f"rbuser{n}"
            at = FAR_FUTURE_MS + (n + 1) * 60_000 + self.rng.randint(0, 999)

            async def find(sdk: Any, text: str = text) -> Any:
                got = await sdk.agents.schedule.list(agent)
                for s in got.scheduled_messages:
                    if any(m.content == text for m in s.message.messages):
                        return s
                return None

            async def make(
                sdk: Any, text: str = text, otid: str = otid, name: str = name, at: int = at
            ) -> Any:
                return await sdk.agents.schedule.create(
                    agent,
                    messages=[{"role": "user", "content": text, "otid": otid, "name": name}],
                    schedule={"type": "one-time", "scheduled_at": at},
                )

            made = await self._create(f"schedule {n}", find, make)
            if self.created_once:
                once.append(text)
            self._set(
                f"schedule:{made.id}",
                messages=[["user", text, name, otid]],
                scheduled_at=at,
                type="one-time",
            )
            got = await self._sdk("agents.schedule.retrieve", str(made.id), agent_id=agent)
            self._schedule_shown("agents.schedule.retrieve", got)
        got = await self._sdk("agents.schedule.list", agent)
        for s in got.scheduled_messages:
            self._schedule_shown("agents.schedule.list", s)
        texts = [m.content for s in got.scheduled_messages for m in s.message.messages]
        self.log.once.append(("agents.schedule.list: the schedules", once, texts))

    # -- 7. a tool ----------------------------------------------------------------------------
    def _tool_shown(self, route: str, tool: Any) -> None:
        self._show(
            route,
            f"tool:{tool.id}",
            name=tool.name,
            description=tool.description,
            tags=sorted(tool.tags or ()),
            return_char_limit=tool.return_char_limit,
        )
        self._stamp(route, f"tool:{tool.id}", tool, change=route == "tools.update")

    async def _tools(self) -> None:
        agent = self.agents[1]
        limit = self.rng.choice((500, 2000, 6000))

        async def find(sdk: Any) -> Any:
            page = await sdk.tools.list(name="rb_probe", limit=1)
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.tools.create(
                source_code=TOOL, tags=["rb-tool"], return_char_limit=limit
            )

        made = await self._create("tool rb_probe", find, make)
        tool_id = str(made.id)
        self._set(f"tool:{tool_id}", name="rb_probe", tags=["rb-tool"], return_char_limit=limit)
        self._tool_shown("tools.create", made)
        changes: dict[str, Any] = {}
        while not changes:
            if self.rng.random() < 0.6:
                changes["description"] = f"Probe the readback, take {self.rng.randint(1, 99)}."
            if self.rng.random() < 0.5:
                changes["tags"] = sorted(self.rng.sample(("rb-tool", "rb-probe", "rb-x"), 2))
            if self.rng.random() < 0.5:
                changes["return_char_limit"] = self.rng.choice((300, 3000, 9000))
        got = await self._sdk("tools.update", tool_id, **changes)
        self._set(f"tool:{tool_id}", **changes)
        self._tool_shown("tools.update", got)
        self._tool_shown("tools.retrieve", await self._sdk("tools.retrieve", tool_id))
        page = await self._sdk("tools.list", name="rb_probe", limit=10)
        for tool in page.items:
            self._tool_shown("tools.list(name=rb_probe)", tool)
        self.log.members.append(
            ("tools.list(name=rb_probe)", [tool_id], [str(t.id) for t in page.items])
        )
        await self._sdk("agents.tools.attach", tool_id, agent_id=agent)
        page = await self._sdk("agents.tools.list", agent, limit=100)
        for tool in page.items:
            self._tool_shown(f"agents.tools.list({agent})", tool)
        self.log.members.append(
            (f"agents.tools.list({agent})", [tool_id], [str(t.id) for t in page.items])
        )

    # -- 8. messages --------------------------------------------------------------------------
    def _conversation_shown(self, route: str, conv: Any) -> None:
        self._show(
            route, f"conversation:{conv.id}", summary=conv.summary, description=conv.description
        )

    async def _messages(self) -> None:
        agent = self.agents[0]
        sent: list[str] = []
        runs: list[str] = []  # the runs of the sends, in order
        for n in range(self.rng.randint(2, 3)):
            otid = f"readback-send-{n}"
            text = f"readback note {n}: {self.rng.choice(WORDS)} ({MARK})"
            got = await self._sdk(
                "agents.messages.create",
                agent,
                messages=[{"role": "user", "content": text, "otid": otid}],
            )
            self._set(f"message:{otid}", content=text)
            sent.append(otid)
            for run_id in sorted({str(m.run_id) for m in got.messages if m.run_id}):
                self._set(f"run:{run_id}", agent_id=agent, conversation_id=None)
                runs.append(run_id)
            self.log.answers.append(
                (f"agents.messages.create({otid})", [str(m.message_type) for m in got.messages])
            )

        async def find_conv(sdk: Any) -> Any:
            got = await sdk.conversations.list(agent_id=agent, limit=100)
            items = got if isinstance(got, list) else got.items
            same = [c for c in items if c.summary == "readback thread"]
            return same[0] if same else None

        conv = await self._create(
            "conversation",
            find_conv,
            lambda sdk: sdk.conversations.create(
                agent_id=agent, summary="readback thread", description="the first"
            ),
        )
        conv_id = str(conv.id)
        self._set(f"conversation:{conv_id}", summary="readback thread", description="the first")
        self._conversation_shown("conversations.create", conv)
        description = f"changed {self.rng.randint(1, 99)}"
        got = await self._sdk("conversations.update", conv_id, description=description)
        self._set(f"conversation:{conv_id}", description=description)
        self._conversation_shown("conversations.update", got)
        got = await self._sdk("conversations.retrieve", conv_id)
        self._conversation_shown("conversations.retrieve", got)
        got = await self._sdk("conversations.list", agent_id=agent, limit=100)
        for c in got if isinstance(got, list) else got.items:
            self._conversation_shown(f"conversations.list(agent_id={agent})", c)
        otid = "readback-thread-0"
        text = f"readback thread note: {self.rng.choice(WORDS)} ({MARK})"

        async def attempt(sdk: Any, _: int) -> tuple[list[str], set[str]]:
            stream = await sdk.conversations.messages.create(
                conv_id, messages=[{"role": "user", "content": text, "otid": otid}]
            )
            types: list[str] = []
            runs: set[str] = set()
            stop = None
            async for chunk in stream:
                if chunk.message_type == "stop_reason":
                    stop = chunk.stop_reason
                elif chunk.message_type not in ("ping", "usage_statistics"):
                    types.append(str(chunk.message_type))
                    if getattr(chunk, "run_id", None):
                        runs.add(str(chunk.run_id))
            if stop is None:
                from ._agent_http import IncompleteStreamError, unterminated

                self.clients.link.unterminated.append(unterminated(f"readback {otid}"))
                raise IncompleteStreamError("the stream ended before its stop reason")
            return types, runs

        types, thread_runs = await self._call("conversations.messages.create", attempt)
        self._set(f"message:{otid}", content=text)
        self.log.answers.append((f"conversations.messages.create({otid}) stream", types))
        for run_id in sorted(thread_runs):
            self._set(f"run:{run_id}", conversation_id=conv_id)
            run = await self._sdk("runs.retrieve", run_id)
            self._show("runs.retrieve", f"run:{run_id}", conversation_id=run.conversation_id)
        page = await self._sdk("runs.list", conversation_id=conv_id, limit=1000)
        for run in page.items:
            self._show(
                f"runs.list(conversation_id={conv_id})",
                f"run:{run.id}",
                conversation_id=run.conversation_id,
            )
        self.log.members.append(
            (
                f"runs.list(conversation_id={conv_id})",
                sorted(thread_runs),
                sorted(str(r.id) for r in page.items),
            )
        )

        for run_id in sorted(thread_runs):
            self._set(f"run:{run_id}", agent_id=agent)

        async def fetch_runs(
            order: str, after: str | None, before: str | None, limit: int
        ) -> list[tuple[str, str, Any]]:
            page = await self._sdk(
                "runs.list", agent_id=agent, order=order, limit=limit, **_cursors(after, before)
            )
            for r in page.items:
                self._show(
                    f"runs.list(agent_id={agent})",
                    f"run:{r.id}",
                    agent_id=r.agent_id,
                    conversation_id=r.conversation_id,
                )
            return [(str(r.id), str(r.agent_id), None) for r in page.items]

        listed = await self._every_way(f"runs.list(agent_id={agent})", fetch_runs)
        if listed is not None:
            self.log.members.append(
                (
                    f"runs.list(agent_id={agent}): the runs of its sends",
                    sorted({*runs, *thread_runs}),
                    sorted(i for i, _, _ in listed if i in {*runs, *thread_runs}),
                )
            )

        await self._steps(agent, sorted({*runs, *thread_runs}))

        route = f"agents.messages.list({agent})"

        async def fetch(
            order: str, after: str | None, before: str | None, limit: int
        ) -> list[tuple[str, str, Any]]:
            got = await self._sdk(
                "agents.messages.list", agent, order=order, limit=limit, **_cursors(after, before)
            )
            items = _items(got)
            for m in items:
                if m.message_type == "user_message" and (m.otid or "").startswith("readback-"):
                    self._show(route, f"message:{m.otid}", content=m.content)
            return [(str(m.id), str(m.message_type), None) for m in items]

        await self._every_way(route, fetch, sizes=(1, 4))
        history = _items(await self._sdk("agents.messages.list", agent, limit=1000, order="asc"))
        otids = [
            str(m.otid)
            for m in history
            if m.message_type == "user_message" and (m.otid or "").startswith("readback-send-")
        ]
        self.log.members.append((f"{route}: the inputs sent, by otid", sent, otids))

    async def _steps(self, agent: str, runs: list[str]) -> None:
        """The agent's steps: listed every way by agent, each showing its run's agent; a run's
        steps (``runs.steps.list``, ``steps.list(trace_ids)``) are those of the agent's list
        that name it; a step's metrics name its agent and run."""

        async def fetch(
            order: str, after: str | None, before: str | None, limit: int, **more: Any
        ) -> list[tuple[str, str, Any]]:
            page = await self._sdk(
                "steps.list",
                agent_id=agent,
                order=order,
                limit=limit,
                **_cursors(after, before),
                **more,
            )
            for step in page.items:
                self._show(
                    f"steps.list(agent_id={agent})", f"run:{step.run_id}", agent_id=step.agent_id
                )
            return [(str(st.id), str(st.run_id), None) for st in page.items]

        listed = await self._every_way(f"steps.list(agent_id={agent})", fetch, sizes=(1, 4))
        if listed is None:
            return
        full = [i for i, _, _ in listed]
        run_of = {i: r for i, r, _ in listed}
        for run_id in runs:
            page = await self._sdk("runs.steps.list", run_id, limit=1000, order="asc")
            self.log.members.append(
                (
                    f"runs.steps.list({run_id})",
                    [i for i in full if run_of[i] == run_id],
                    [str(st.id) for st in page.items],
                )
            )
        chosen = self.rng.choice(runs) if runs else None
        if chosen is not None:
            order = self.rng.choice(("asc", "desc"))
            limit = self.rng.choice(LIMITS)
            got = await fetch(order, None, None, limit, trace_ids=[chosen])
            self.log.filtered.append(
                Filtered(
                    f"steps.list(agent_id={agent}, trace_ids=[{chosen}]) {order} limit {limit}",
                    [i for i, _, _ in got],
                    full if order == "asc" else full[::-1],
                    {i for i in full if run_of[i] == chosen},
                    limit,
                )
            )
        for step_id in self.rng.sample(full, min(2, len(full))):
            metrics = await self._sdk("steps.metrics.retrieve", step_id)
            self._show(
                "steps.metrics.retrieve", f"run:{run_of[step_id]}", agent_id=metrics.agent_id
            )
            self.log.members.append(
                (
                    f"steps.metrics.retrieve({step_id}).run_id",
                    [run_of[step_id]],
                    [str(metrics.run_id)],
                )
            )
