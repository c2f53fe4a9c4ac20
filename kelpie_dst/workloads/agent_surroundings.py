"""The agent's surroundings under faults: shared archives and the vector search, identities
and their keys, folders shared by agents (``agent_surroundings``).

Server nodes (``topology.nodes``) share the database host, each running the production node
(no model is called: nothing here sends a message). A client on ``main``, on random live nodes,
retrying what is safe to repeat:

* makes two agents; stores passages of their own (tagged ``red``, ``blue``, both or none) and
  an archive (``shelf``) with a batch of passages dated over the last days (explicit
  ``created_at``), attached to the first agent; later a second batch, one passage of the first
  deleted, the archive attached to the second agent and detached again;
* searches both agents' archival memory: a query that is a stored passage's exact text or one
  or two words of the vocabulary, tags any or all, ``top_k`` 1 to 8, and a date range whose
  ends are two stored passages' exact ``created_at`` (so both ends are judged inclusive);
* makes identities on the database (letta-client cannot), one with a key already taken, changes
  one's key and makes one with the freed key; attaches them to the agents, detaches one from
  one agent, and lists the agents of each;
* uploads one file name four times with ``suffix`` to a folder, attaches the folder to both
  agents, each opens a file, and the folder is detached from the first agent.

The properties (``surroundings_consistent``, :mod:`._surroundings_checks`) are judged against
the client's model: the search ranks by the cosine of a fresh embedder's vectors within the
documented filters, an identifier key names one identity, an identity's agents are the attached
ones, a folder's names are unique, and one agent's detach leaves another's open files.

Session 17 (rtM): a first attempt to delete a passage the client has just listed must not be
answered 404; ``deletes`` (default 1) repeats the two deletes, and ``message_windows`` (default
off) sends each agent three messages and judges message search by date windows against the
same search without dates (``agent_surroundings_deletes`` turns both up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentStorageError,
    CreateAgent,
    IdentityStore,
    InputMessage,
    InvalidRequestError,
    LoopConfig,
    ResourceNotFoundError,
)
from kelpie_agent.embeddings import HashingEmbedder
from kelpie_agent.service import (
    AgentService,
    NotFoundError,
    ServiceError,
    ServiceOptions,
    open_agent_node,
)
from kelpie_agent.service import _archives as archives
from kelpie_agent.service import _folders as folders
from kelpie_agent.service import _schedules as schedules

from ..scenario import WorkloadContext, invariant, workload
from ..shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_schedules import _FAILURES, OPTIONS, Client
from ._surroundings_checks import (
    MISSING,
    PassageSeen,
    ScheduleSeen,
    SearchSeen,
    SurroundingsLog,
    check_surroundings,
    cosine,
)
from ._surroundings_cuts import content_polls, cut_attempts, file_pages, scoped_entry
from ._surroundings_steps import step_windows

__all__ = ["agent_surroundings", "surroundings_consistent"]

T = TypeVar("T")
SERVICE = ServiceOptions(request_timeout=20.0, scheduler=False)
WORDS = (
    "kelp",
    "otter",
    "tide",
    "reef",
    "shell",
    "urchin",
    "harbor",
    "lantern",
    "anchor",
    "drift",
    "pebble",
    "current",
)
TAGS = ("red", "blue")
# crons whose next time rolls over an hour, a day, a week or a month from the epoch's first
# minutes (Thursday 1 January 2026), read by the oracle's own model (_cron_model)
CRONS = (
    "0 9 * * 1-5",
    "30 */6 * * *",
    "15 14 * * sun",
    "5,35 8-10 2 * *",
    "0 0 1 * *",
    "59 23 31 * *",
    "0 12 * feb mon",
    "*/20 3 * * 6,0",
    "0 6 3 * fri",
)
DAY = 86_400.0


def _start(
    ctx: WorkloadContext, options: ServiceOptions = SERVICE, loop_config: LoopConfig | None = None
) -> tuple[dict[str, AgentService], kelpie_dst.Node]:
    """The database host and the server nodes (booted on every restart); the live services by
    node name, and the database host."""
    topology = ctx.topology
    db = ctx.sim.add_node(topology.database or "db")
    services: dict[str, AgentService] = {}

    async def server(node: kelpie_dst.Node) -> None:
        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming()),
            dispatcher_options=OPTIONS,
            options=options,
            loop_config=loop_config,
            observer=kelpie_dst.log,
            **coherence_options(ctx, db),
        ) as service:
            services[node.name] = service
            await trio.sleep_forever()

    for name in topology.nodes or ("server-1", "server-2", "server-3"):
        ctx.sim.add_node(name, server)
    return services, db


class Surroundings:
    def __init__(self, ctx: WorkloadContext, client: Client, db: kelpie_dst.Node) -> None:
        self.ctx = ctx
        self.client = client
        self.rng = ctx.rng("surroundings")
        self.db = db
        self.log = SurroundingsLog()
        self.passages: dict[str, PassageSeen] = {}
        self.scope: dict[str, list[str]] = {}  # agent -> archives attached, in attach order
        self.folders_of: dict[str, set[str]] = {}  # agent -> folders attached (scoped_lists)
        self.number = 0

    # -- archival memory ------------------------------------------------------------------
    def _text(self) -> str:
        self.number += 1
        words = " ".join(self.rng.sample(WORDS, self.rng.choice((2, 3))))
        return f"note{self.number:03d} {words}"

    def _tags(self) -> frozenset[str]:
        return frozenset(t for t in TAGS if self.rng.random() < 0.4)

    async def own_passage(self, agent: str) -> None:
        text, tags = self._text(), self._tags()
        # an insert goes to the agent's first attached archive, if it has one (documented)
        seen = PassageSeen(text, self.scope[agent][0] if self.scope[agent] else agent, tags)
        self.passages[text] = seen
        try:
            [record] = await self.client.once(
                lambda s: s.insert_passage(agent, text, tags=tuple(sorted(tags)))
            )
        except _FAILURES:
            return  # unknown outcome: it may be there
        except ServiceError:
            del self.passages[text]  # refused: it never happened
            return
        seen.sure, seen.created_at, seen.id = True, record.created_at, record.id

    async def archive_batch(self, archive: str, count: int) -> None:
        now = self.client.clock.now()
        items: list[archives.PassageItem] = []
        batch = []
        for _ in range(count):
            text, tags = self._text(), self._tags()
            # dated over the last three days, to the millisecond (two may share a moment)
            created = round(now - self.rng.choice((0, 1, 2, 3)) * DAY - self.rng.uniform(0, 9), 3)
            items.append((text, tuple(sorted(tags)), {}, created))
            seen = PassageSeen(text, archive, tags)
            batch.append((seen, created))
            self.passages[text] = seen
        try:
            records = await self.client.once(
                lambda s: archives.add_archive_passages(s, archive, items)
            )
        except _FAILURES:
            return
        except ServiceError:
            for seen, _ in batch:
                del self.passages[seen.text]
            return
        ids = {record.text: record.id for record in records}
        for seen, created in batch:
            seen.sure, seen.created_at, seen.id = True, created, ids.get(seen.text)

    async def delete_own_passage(self, agent: str) -> None:
        """Delete one of the agent's own passages (through its actor), then search at once."""
        mine = [p for p in self.passages.values() if p.owner == agent and p.sure and not p.deleted]
        if not mine:
            return
        target = self.rng.choice(mine)

        attempts = 0

        async def delete(s: AgentService) -> None:
            nonlocal attempts
            attempts += 1
            found = await s.list_passages(agent, limit=1000)
            for record in found:
                if record.text == target.text:
                    try:
                        await s.delete_passage(agent, record.id)
                    except NotFoundError:
                        if attempts == 1 and record.archive_id is None:  # as for the archive's
                            self.log.problems.append(
                                f"deleting {agent}'s passage {record.id} (listed just before, "
                                "deleted by no one else) was answered 404"
                            )

        await self.client.until_done(delete)
        target.deleted = True
        await self.search(agent)

    async def delete_archive_passage(self, archive: str) -> None:
        mine = [
            p for p in self.passages.values() if p.owner == archive and p.sure and not p.deleted
        ]
        if not mine:
            return
        target = self.rng.choice(mine)

        attempts = 0

        async def delete(s: AgentService) -> None:
            nonlocal attempts
            attempts += 1
            found = await s.list_passages(self.agents[0], limit=1000)
            ids = [r.id for r in found if r.text == target.text]
            listed = {r.id for r in found if r.text == target.text and r.archive_id == archive}
            for passage_id in ids:
                try:
                    await archives.delete_archive_passage(s, archive, passage_id)
                except NotFoundError:
                    # A later attempt may find its predecessor's delete landed; the first
                    # cannot: nothing else deletes this passage (session 17, rtM).
                    if attempts == 1 and passage_id in listed:
                        self.log.problems.append(
                            f"deleting archive {archive}'s passage {passage_id} (listed just "
                            "before, deleted by no one else) was answered 404"
                        )

        if archive not in self.scope[self.agents[0]]:
            return
        await self.client.until_done(delete)
        target.deleted = True

    async def search(self, agent: str) -> None:
        rng = self.rng
        scope = {agent, *self.scope[agent]}
        there = [p for p in self.passages.values() if p.owner in scope and not p.deleted]
        certain = [p for p in there if p.sure]
        roll = rng.random()
        if certain and roll < 0.4:
            query = rng.choice(certain).text
        elif roll < 0.5:
            query = "the of it"  # stop words only: a zero vector, every passage scores 0
        else:
            query = " ".join(rng.sample(WORDS, rng.choice((1, 2))))
        tags = tuple(sorted(rng.sample(TAGS, rng.choice((1, 2))))) if rng.random() < 0.4 else ()
        mode = rng.choice(("any", "all"))
        top_k = rng.randint(1, 8)
        start = end = None
        dated = sorted({p.created_at for p in certain if p.created_at is not None})
        if dated and rng.random() < 0.5:
            first, last = sorted((rng.choice(dated), rng.choice(dated)))
            start = first if rng.random() < 0.8 else None
            end = last if rng.random() < 0.8 else None

        def ask(text: str) -> Callable[[AgentService], Awaitable[Any]]:
            return lambda s: s.search_passages(
                agent, text, tags=tags, tag_match_mode=mode, top_k=top_k, start=start, end=end
            )

        try:
            hits = await self.client.once(ask(query))
        except (*_FAILURES, ServiceError):
            return
        if rng.random() < 0.3 and len(certain) == len(there):  # nothing of unknown outcome
            changed = "The " + query.upper() + " of it"
            with contextlib.suppress(*_FAILURES, ServiceError):
                again = await self.client.once(ask(changed))
                self.log.respelled.append(
                    (
                        query,
                        changed,
                        tuple((h.passage.text, h.score) for h in hits),
                        tuple((h.passage.text, h.score) for h in again),
                    )
                )
        embedder = HashingEmbedder()  # a fresh one: the oracle's, not a node's
        [q] = await embedder.embed([query])
        vectors = await embedder.embed([p.text for p in there])
        self.log.searches.append(
            SearchSeen(
                agent=agent,
                query=query,
                tags=tags,
                mode=mode,
                top_k=top_k,
                start=start,
                end=end,
                certain=frozenset(p.text for p in certain),
                possible=frozenset(p.text for p in there),
                model={p.text: cosine(q, v) for p, v in zip(there, vectors, strict=True)},
                created={p.text: p.created_at for p in certain if p.created_at is not None},
                tagged={p.text: p.tags for p in there},
                hits=tuple(
                    (h.passage.text, h.score, h.passage.created_at, frozenset(h.passage.tags))
                    for h in hits
                ),
                hit_ids=tuple(h.passage.id for h in hits),
                ids={p.text: p.id for p in there if p.id is not None},
                zero_query=not any(q),
            )
        )

    async def search_everywhere(self, agent: str | None) -> None:
        """``/v1/passages/search``: one agent's archival memory (``agent_id``) or every agent's
        that has passages of its own, merged best first, at most ``limit``. Judged as one
        search over (agent, passage) pairs."""
        rng = self.rng
        agents = [agent] if agent is not None else list(self.agents)
        pairs: dict[str, PassageSeen] = {}
        for owner in agents:
            scope = {owner, *self.scope[owner]}
            for p in self.passages.values():
                if p.owner in scope and not p.deleted:
                    pairs[f"{owner}|{p.text}"] = p
        if agent is None and any(  # only agents with passages of their own are searched
            not any(p.owner == g and p.sure and not p.deleted for p in self.passages.values())
            for g in agents
        ):
            return
        query = " ".join(rng.sample(WORDS, rng.choice((1, 2))))
        tags = tuple(sorted(rng.sample(TAGS, 1))) if rng.random() < 0.3 else ()
        mode = rng.choice(("any", "all"))
        limit = rng.randint(1, 12)

        def call(s: AgentService) -> Awaitable[Any]:
            return s.search_all_passages(
                query, agent_id=agent, tags=tags, tag_match_mode=mode, limit=limit
            )

        # with cut_calls, first sent to nodes that crash under it: each answer is judged
        answers = await cut_attempts(self, call) if self.ctx.params["cut_calls"] else []
        try:
            answers.append(await self.client.once(call))
        except (*_FAILURES, ServiceError):
            if not answers:
                return
        embedder = HashingEmbedder()
        [q] = await embedder.embed([query])
        texts = sorted({p.text for p in pairs.values()})
        vectors = dict(zip(texts, await embedder.embed(texts), strict=True))
        certain = {k: p for k, p in pairs.items() if p.sure}
        for found in answers:
            self._everywhere_seen(
                agent, query, tags, mode, limit, pairs, certain, q, vectors, found
            )

    def _everywhere_seen(
        self,
        agent: str | None,
        query: str,
        tags: tuple[str, ...],
        mode: str,
        limit: int,
        pairs: dict[str, PassageSeen],
        certain: dict[str, PassageSeen],
        q: Any,
        vectors: dict[str, Any],
        found: Any,
    ) -> None:
        self.log.searches.append(
            SearchSeen(
                agent=f"{agent or 'every agent'} (passages.search)",
                query=query,
                tags=tags,
                mode=mode,
                top_k=limit,
                start=None,
                end=None,
                certain=frozenset(certain),
                possible=frozenset(pairs),
                model={k: cosine(q, vectors[p.text]) for k, p in pairs.items()},
                created={k: p.created_at for k, p in certain.items() if p.created_at is not None},
                tagged={k: p.tags for k, p in pairs.items()},
                hits=tuple(
                    (
                        f"{owner}|{h.passage.text}",
                        h.score,
                        h.passage.created_at,
                        frozenset(h.passage.tags),
                    )
                    for owner, h in found
                ),
                hit_ids=tuple(h.passage.id for _, h in found),
                ids={k: p.id for k, p in pairs.items() if p.id is not None},
                zero_query=not any(q),
            )
        )

    async def numbered(self, agent: str, count: int) -> None:
        """Session 17 (llmL): ``count`` passages alike but for a number (``parcel 4417 left
        the depot``), then a search for each number: the passage holding it must come first,
        strictly (words are runs of letters and digits). Its own random stream: off, nothing
        moves."""
        rng = self.ctx.rng("surroundings-numbered")
        numbers = rng.sample(range(1000, 10000), count)
        for number in numbers:
            text = f"parcel {number} left the depot"
            seen = PassageSeen(text, agent, frozenset())
            self.passages[text] = seen
            try:
                [record] = await self.client.once(
                    lambda s, t=text: s.insert_passage(agent, t)  # type: ignore[misc]
                )
            except _FAILURES:
                continue  # unknown outcome: it may be there
            except ServiceError:
                del self.passages[text]
                continue
            seen.sure, seen.created_at, seen.id = True, record.created_at, record.id
        for number in numbers:
            text = f"parcel {number} left the depot"
            stored = self.passages.get(text)
            if stored is None or not stored.sure:
                continue
            try:
                hits = await self.client.once(
                    lambda s, q=str(number): s.search_passages(agent, q, top_k=3)  # type: ignore[misc]
                )
            except (*_FAILURES, ServiceError):
                continue
            self.log.numbered.append(
                (str(number), text, tuple((h.passage.text, h.score) for h in hits))
            )
            # the same search respelled as the embedder must not notice (docs/embeddings.md):
            # NFKC (full-width digits are digits) and case, and apostrophes dropped; judged
            # when nothing in scope is of unknown outcome (it might land in between)
            scope = {agent, *self.scope[agent]}
            if any(
                p.owner in scope and not p.deleted and not p.sure for p in self.passages.values()
            ):
                continue
            wide = "".join(chr(ord(c) + 0xFEE0) for c in str(number))
            for plain, changed in (
                (str(number), f"THE {wide}"),
                (f"parcels {number}", f"Parcel's {number}"),
            ):
                try:
                    first = await self.client.once(
                        lambda s, q=plain: s.search_passages(agent, q, top_k=3)  # type: ignore[misc]
                    )
                    again = await self.client.once(
                        lambda s, q=changed: s.search_passages(agent, q, top_k=3)  # type: ignore[misc]
                    )
                except (*_FAILURES, ServiceError):
                    continue
                self.log.respelled.append(
                    (
                        plain,
                        changed,
                        tuple((h.passage.text, h.score) for h in first),
                        tuple((h.passage.text, h.score) for h in again),
                    )
                )

    async def retire_archive(self, archive: str) -> None:
        """Rename the archive, then delete it: it is detached from its agents, its passages
        leave their archival memory, and it is no longer listed."""
        log = self.log
        await self.client.until_done(
            lambda s: archives.update_archive(s, archive, {"name": "shelf-renamed"})
        )
        by_new = await self.client.until_done(
            lambda s: archives.list_archives(s, name="shelf-renamed")
        )
        by_old = await self.client.until_done(lambda s: archives.list_archives(s, name="shelf"))
        log.archive_names = (archive, [a.id for a in by_new], [a.id for a in by_old])

        async def delete(s: AgentService) -> None:
            with contextlib.suppress(NotFoundError):  # a retry of a delete that landed
                await archives.delete_archive(s, archive)

        if self.ctx.params["cut_calls"]:
            await cut_attempts(self, delete)
        await self.client.until_done(delete)
        for p in self.passages.values():
            if p.owner == archive:
                p.deleted = True
        for agent in self.agents:
            if archive in self.scope[agent]:
                self.scope[agent].remove(archive)
        listed = await self.client.until_done(lambda s: archives.list_archives(s, limit=50))
        views = [
            await self.client.until_done(lambda s, g=g: s.get_agent(g))  # type: ignore[misc]
            for g in self.agents
        ]
        log.archive_gone = (
            archive,
            archive in {a.id for a in listed},
            sorted(v.agent.id for v in views if archive in v.agent.archive_ids),
        )
        await self.scoped_lists()

    async def attach_archive(self, agent: str, archive: str, attach: bool) -> None:
        call = archives.attach_archive if attach else archives.detach_archive
        await self.client.until_done(lambda s: call(s, agent, archive))
        if attach and archive not in self.scope[agent]:
            self.scope[agent].append(archive)
        elif not attach and archive in self.scope[agent]:
            self.scope[agent].remove(archive)
        await self.scoped_lists()

    async def scoped_lists(self) -> None:
        """With ``scoped_lists``: each agent's archives (``archives.list(agent_id=...)``) and
        folders (``agents.folders``) are what the client attached to it (svcV)."""
        if not self.ctx.params["scoped_lists"]:
            return
        for agent in self.agents:
            found = await self.client.until_done(
                lambda s, g=agent: archives.list_archives(s, agent_id=g, limit=1000)  # type: ignore[misc]
            )
            self.log.scoped.append(
                scoped_entry(f"{agent}'s archives", self.scope[agent], (a.id for a in found))
            )
            held = await self.client.until_done(
                lambda s, g=agent: folders.agent_folders(s, g, limit=50)  # type: ignore[misc]
            )
            self.log.scoped.append(
                scoped_entry(
                    f"{agent}'s folders", self.folders_of.get(agent, ()), (f.id for f in held)
                )
            )

    # -- identities -----------------------------------------------------------------------
    async def _until(self, call: Callable[[], Awaitable[T]]) -> T:
        """A store call (safe to repeat) until storage lets it through."""
        while True:
            try:
                return await call()
            except AgentStorageError:
                await trio.sleep(self.rng.uniform(0.5, 2.0))

    @staticmethod
    async def _delete_identity(store: IdentityStore, identity_id: str) -> None:
        """Delete it (safe to repeat: an identity already gone counts as deleted)."""
        try:
            await store.delete(identity_id)
        except ResourceNotFoundError:
            pass

    async def _renames(self, store: IdentityStore) -> None:
        """Rename every acknowledged identity as a client that sends the record back whole does:
        the new name with the identifier key it already has (rtU)."""
        for identity, key in sorted(self.log.identity_keys.items()):
            name = f"{key} renamed"
            try:
                await self._until(
                    lambda i=identity, k=key, n=name: store.update(i, identifier_key=k, name=n)  # type: ignore[misc]
                )
            except InvalidRequestError as error:
                self.log.identity_renames.append((identity, name, f"refused: {error}"))
                continue
            self.log.identity_renames.append((identity, name, "ok"))

    async def identities(self) -> None:
        main = self.ctx.sim.current_node()
        assert main is not None
        store = IdentityStore(open_kv(main, host=self.db), sim_ports(main))
        log = self.log
        held: set[str] = set()  # keys an acknowledged identity holds
        maybe: set[str] = set()  # keys a create with an unknown outcome asked for

        async def create(key: str, name: str) -> str | None:
            taken = key in held
            try:
                record = await store.create(key, name)
            except AgentStorageError:
                maybe.add(key)
                return None
            except InvalidRequestError:
                if key not in maybe:
                    log.identity_creates.append((key, "refused", taken))
                return None
            log.identity_creates.append((key, f"made:{record.id}", taken))
            held.add(key)
            log.identity_keys[record.id] = key
            return record.id

        made = [await create(f"user-{k}", f"User {k}") for k in range(3)]
        await create("user-0", "User 0 again")  # a key taken (refused)
        if made[1] is not None:  # a key change (safe to repeat), then the freed key reused
            await self._until(lambda: store.update(made[1] or "", identifier_key="user-1b"))
            held.discard("user-1")
            held.add("user-1b")
            log.identity_keys[made[1]] = "user-1b"
            await create("user-1", "User 1 anew")
        looked = ["user-0", "user-1", "user-1b", "user-2"]
        if self.ctx.params["identity_deletes"]:  # a key freed by a delete, then taken again
            gone = await create("user-9", "User 9")
            if gone is not None:
                await self._until(lambda: self._delete_identity(store, gone))
                held.discard("user-9")
                del log.identity_keys[gone]
                log.identity_deleted.append(gone)
                await create("user-9", "User 9 anew")
                looked.append("user-9")
        if self.ctx.params["identity_renames"]:  # each renamed, its record sent back whole
            await self._renames(store)
        listed = await self._until(store.all)
        log.identity_list = [(r.id, r.identifier_key) for r in listed]
        log.identity_names = {r.id: r.name for r in listed}
        for key in looked:
            try:
                found = await self._until(lambda k=key: store.by_key(k))  # type: ignore[misc]
            except ResourceNotFoundError:  # the key names an identity that is not there
                log.identity_lookups.append((key, MISSING, None))
                continue
            log.identity_lookups.append(
                (key, found.id if found else None, found.identifier_key if found else None)
            )
        # attached to agents: the first to both, the third to the second; then the first
        # detached from the first agent
        plan: dict[str, set[str]] = {}
        first, third = made[0], made[2]
        a, b = self.agents
        for identity, agents in ((first, (a, b)), (third, (b,))):
            if identity is None:
                continue
            plan[identity] = set()
            for agent in agents:
                await self.client.until_done(
                    lambda s, i=identity, g=agent: archives.link(s, g, "identity", i)  # type: ignore[misc]
                )
                plan[identity].add(agent)
        if first is not None:
            await self.client.until_done(lambda s: archives.unlink(s, a, "identity", first))
            plan[first].discard(a)
        for identity, want in plan.items():

            def agents_of(s: AgentService, i: str = identity) -> Awaitable[Any]:
                return s.list_agents(identity_id=i, limit=50)

            lists: list[Any] = []
            if self.ctx.params["cut_calls"]:  # first sent to nodes that crash under it
                lists = await cut_attempts(self, agents_of)
            lists.append(await self.client.until_done(agents_of))
            for views in lists:
                got = frozenset(v.agent.id for v in views) & set(self.agents)
                log.identity_agents.append((identity, frozenset(want), got))

    # -- folders --------------------------------------------------------------------------
    async def folder(self) -> None:
        log = self.log

        async def make(s: AgentService) -> Any:
            found = await folders.list_folders(s, name="docs")
            return found[0] if found else await folders.create_folder(s, "docs")

        folder = await self.client.until_done(make)
        if self.ctx.params["scoped_lists"]:  # a folder no agent has: no agent lists it
            await self.client.until_done(self._spare_folder)
        for n in range(4):
            data = f"notes, take {n}\nkelp and tide\n".encode()
            try:
                record = await self.client.once(
                    lambda s, d=data: folders.upload_file(  # type: ignore[misc]
                        s,
                        folder.id,
                        "notes.txt",
                        d,
                        declared_type=None,
                        duplicate_handling="suffix",
                    )
                )
            except (*_FAILURES, ServiceError):
                log.uploads.append(("notes.txt", None))
                continue
            log.uploads.append(("notes.txt", record.file_name if record else None))
            if record is not None and self.ctx.params["content_polls"]:  # read as processed
                await content_polls(self, folder.id, record.id)
        for name in ("a.txt", "b.txt"):
            await self.client.until_done(
                lambda s, n=name: folders.upload_file(  # type: ignore[misc]
                    s,
                    folder.id,
                    n,
                    f"{n}\n".encode(),
                    declared_type=None,
                    duplicate_handling="skip",
                )
            )
        files = await self.client.until_done(lambda s: folders.list_files(s, folder.id))
        log.folder_names = [f.file_name for f in files]
        a, b = self.agents
        for agent in (a, b):
            await self.client.until_done(lambda s, g=agent: folders.attach_folder(s, g, folder.id))  # type: ignore[misc]
            self.folders_of.setdefault(agent, set()).add(folder.id)
        await self.scoped_lists()
        by_name = {f.file_name: f.id for f in files}
        for agent, name in ((a, "b.txt"), (b, "a.txt")):
            file_id = by_name.get(name)
            if file_id is not None:
                await self.client.until_done(
                    lambda s, g=agent, f=file_id: folders.open_file(s, g, f)  # type: ignore[misc]
                )

        async def open_of(agent: str) -> frozenset[str]:
            found, _ = await self.client.until_done(
                lambda s: folders.agent_files(s, agent, is_open=True, limit=50)
            )
            return frozenset(f.record.id for f in found)

        log.open_before = await open_of(b)
        if self.ctx.params["scoped_lists"]:  # b's files in pages (svcV)
            await file_pages(self, b)

        async def detach(s: AgentService) -> None:
            with contextlib.suppress(NotFoundError):  # a retry of a detach that landed
                await folders.detach_folder(s, a, folder.id)

        await self.client.until_done(detach)
        self.folders_of[a].discard(folder.id)
        await self.scoped_lists()
        log.open_after = await open_of(b)
        listed, _ = await self.client.until_done(lambda s: folders.agent_files(s, a, limit=50))
        log.detached_listed = len(listed)
        await self.duplicates(folder.id)

        async def delete(s: AgentService) -> None:
            with contextlib.suppress(NotFoundError):  # a retry of a delete that landed
                await folders.delete_folder(s, folder.id)

        if self.ctx.params["cut_calls"]:
            await cut_attempts(self, delete)
        await self.client.until_done(delete)
        for attached in self.folders_of.values():
            attached.discard(folder.id)
        await self.scoped_lists()
        left, _ = await self.client.until_done(lambda s: folders.agent_files(s, b, limit=50))
        named = await self.client.until_done(lambda s: folders.list_folders(s, name="docs"))
        view = await self.client.until_done(lambda s: s.get_agent(b))
        log.folder_gone = (len(left), len(named), folder.id in view.agent.folder_ids)
        try:  # the deleted folder's name is free again, and a renamed one's old name too
            again = await self.client.until_done(make)
            await self.client.until_done(
                lambda s: folders.update_folder(s, again.id, {"name": "docs-old"})
            )
            third = await self.client.until_done(make)
            named = await self.client.until_done(lambda s: folders.list_folders(s, name="docs"))
            log.name_reused = (
                len({folder.id, again.id, third.id}) == 3,
                [f.id for f in named] == [third.id],
            )
        except ServiceError as error:
            log.name_reused = f"{type(error).__name__}: {error}"

    @staticmethod
    async def _spare_folder(s: AgentService) -> Any:
        found = await folders.list_folders(s, name="spare")
        return found[0] if found else await folders.create_folder(s, "spare")

    async def duplicates(self, folder_id: str) -> None:
        """Uploads of the taken name notes.txt: ``error`` is refused, ``skip`` answers the file
        of that name, ``replace`` stores a new file in its place."""
        log = self.log

        def upload(how: str) -> Callable[[AgentService], Awaitable[Any]]:
            return lambda s: folders.upload_file(
                s, folder_id, "notes.txt", b"again\n", declared_type=None, duplicate_handling=how
            )

        try:
            await self.client.once(upload("error"))
        except _FAILURES:
            pass
        except ServiceError:
            log.error_refused = True
        else:
            log.error_refused = False
        kept = await self.client.until_done(upload("skip"))
        if kept is None:
            return
        log.skip_name = kept.file_name
        try:
            new = await self.client.once(upload("replace"))
        except (*_FAILURES, ServiceError):
            return
        files = await self.client.until_done(lambda s: folders.list_files(s, folder_id))
        log.replaced = (kept.id, new.id, frozenset(f.id for f in files))
        log.folder_names = [f.file_name for f in files]

    # -- schedules ------------------------------------------------------------------------
    async def schedules(self) -> None:
        """Schedules far ahead (the nodes' schedulers are off: nothing fires): one-time and
        recurring on crons that roll over hours, days, weeks and months; retrieved, listed
        whole and in pages, one deleted."""
        agent = self.agents[1]
        log = self.log
        clock = self.client.clock
        for cron in CRONS:
            await self._schedule(agent, cron, None)
            if self.rng.random() < 0.5:
                await self._schedule(agent, None, clock.now() + self.rng.uniform(600, 9 * DAY))
        for seen in log.schedules:
            if seen.id is None:
                continue
            record = await self.client.until_done(
                lambda s, i=seen.id: schedules.get_schedule(s, agent, i)  # type: ignore[misc]
            )
            seen.retrieved = record.next_at
        made = [s for s in log.schedules if s.id is not None]
        if made:
            gone = self.rng.choice(made)

            async def delete(s: AgentService) -> None:
                with contextlib.suppress(NotFoundError):  # a retry of a delete that landed
                    await schedules.delete_schedule(s, agent, gone.id or "")

            await self.client.until_done(delete)
            gone.deleted = True
            try:
                await self.client.until_done(
                    lambda s: schedules.get_schedule(s, agent, gone.id or "")
                )
            except NotFoundError:
                log.schedule_gone.append((gone.id or "", False))
            else:
                log.schedule_gone.append((gone.id or "", True))
        everything, _ = await self.client.until_done(lambda s: schedules.list_schedules(s, agent))
        log.schedule_listed = [(r.id, r.created_at, r.id) for r in everything]
        for size in (1, 2):
            more: list[bool] = []
            pages: list[list[str]] = []
            after: str | None = None
            while len(more) < 50:
                page, further = await self.client.until_done(
                    lambda s, a=after, n=size: schedules.list_schedules(  # type: ignore[misc]
                        s, agent, after=a, limit=n
                    )
                )
                more.append(further)
                pages.append([r.id for r in page])
                if not further or not page:
                    break
                after = page[-1].id
            log.schedule_pages.append((size, more, pages))

    async def _schedule(self, agent: str, cron: str | None, at: float | None) -> None:
        clock = self.client.clock
        seen = ScheduleSeen(cron, at, clock.now())
        self.log.schedules.append(seen)
        spec: dict[str, object] = (
            {"type": "recurring", "cron_expression": cron}
            if cron is not None
            else {"type": "one-time", "scheduled_at": (at or 0.0) * 1000}
        )
        messages = (InputMessage("user", f"later {len(self.log.schedules)}"),)
        try:
            record = await self.client.once(
                lambda s: schedules.create_schedule(s, agent, messages, spec)
            )
        except (*_FAILURES, ServiceError):
            return
        seen.acked, seen.id, seen.next_at = clock.now(), record.id, record.next_at

    # -- the run --------------------------------------------------------------------------
    agents: list[str]

    async def message_windows(self, agent: str) -> None:
        """Message search by date (session 17, rtM): the documented window is ``start``
        exclusive, ``end`` inclusive. A word of the agent's stored messages is searched without
        dates (fts, every hit fits the limit), then with each hit's exact ``date`` as the end
        and as the start: each windowed search must answer exactly the dateless hits its
        window keeps. A metamorphic property: no model of the ranking is needed."""
        for n in range(3):  # user messages (the stored system prompt is not searched)
            text = f"tidepool {' '.join(self.rng.sample(WORDS, 3))} {n}"
            with contextlib.suppress(*_FAILURES, ServiceError):
                await self.client.once(
                    lambda s, t=text: s.send_message(agent, [InputMessage("user", t)])  # type: ignore[misc]
                )
        try:
            shown = await self.client.once(lambda s: s.list_messages(agent, limit=1000))
        except (*_FAILURES, ServiceError):
            return
        words = sorted(
            {
                w
                for m in shown
                for w in str(getattr(m, "content", "") or "").casefold().split()
                if w.isalpha() and len(w) >= 6
            }
        )
        if not words:
            return

        async def search(
            word: str, start: float | None, end: float | None
        ) -> dict[str, float] | None:
            try:
                found = await self.client.once(
                    lambda s: s.search_messages(
                        word, agent_id=agent, mode="fts", start=start, end=end, limit=100
                    )
                )
            except (*_FAILURES, ServiceError):
                return None
            return {m.id: m.date for _, m in found}

        every: dict[str, float] | None = None
        word = ""
        for candidate in self.rng.sample(words, min(4, len(words))):  # a stop word: no hits
            word, every = candidate, await search(candidate, None, None)
            if every:
                break
        if not every or len(every) >= 100:
            return
        judged: list[str] = []
        for at in sorted(set(every.values())):
            for start, end in ((None, at), (at, None)):
                got = await search(word, start, end)
                if got is None:
                    continue
                want = {
                    i
                    for i, d in every.items()
                    if (start is None or d > start) and (end is None or d <= end)
                }
                if set(got) != want:
                    judged.append(
                        f"messages.search({word!r}, agent_id={agent}, start={start}, end={end}): "
                        f"answered {sorted(got)}, but the window keeps {sorted(want)} of the "
                        f"dateless hits (start is exclusive, end inclusive)"
                    )
        # judged only if nothing landed meanwhile (a send cut off on the client's side may
        # still be stored by the actor that took it)
        if await search(word, None, None) == every:
            self.log.message_windows += 1
            self.log.problems += judged

    async def run(self) -> None:
        self.agents = []
        for number in range(2):
            request = CreateAgent(name=f"sur-{number}")
            view = await self.client.until_done(lambda s, r=request: s.create_agent(r))  # type: ignore[misc]
            self.agents.append(view.agent.id)
            self.scope[view.agent.id] = []
        a, b = self.agents
        for agent in (a, a, a, b, b):
            await self.own_passage(agent)

        async def make(s: AgentService) -> Any:
            found = await archives.list_archives(s, name="shelf")
            return found[0] if found else await archives.create_archive(s, "shelf")

        shelf = (await self.client.until_done(make)).id
        await self.archive_batch(shelf, int(self.ctx.params["passages"]))
        await self.attach_archive(a, shelf, True)
        for _ in range(int(self.ctx.params["searches"])):
            await self.search(a)
        await self.archive_batch(shelf, int(self.ctx.params["passages"]) // 2)
        await self.own_passage(a)
        for _ in range(int(self.ctx.params["deletes"])):
            await self.delete_archive_passage(shelf)
            await self.delete_own_passage(b)
        if self.ctx.params["message_windows"]:
            for agent in (a, b):
                await self.message_windows(agent)
        if self.ctx.params["step_windows"]:  # svcV: steps listed by time window
            for agent in (a, b):
                await step_windows(self, agent)
        for _ in range(int(self.ctx.params["searches"])):
            await self.search(a if self.rng.random() < 0.7 else b)
        await self.attach_archive(b, shelf, True)
        await self.search(b)
        await self.search(b)
        await self.search_everywhere(None)
        await self.search_everywhere(b)
        await self.attach_archive(b, shelf, False)
        await self.search(b)
        await self.search_everywhere(a)
        await self.retire_archive(shelf)
        await self.search(a)
        await self.search_everywhere(None)
        if int(self.ctx.params["numbered"]):
            await self.numbered(b, int(self.ctx.params["numbered"]))
        await self.identities()
        await self.folder()
        await self.schedules()


@workload(
    params={
        "passages": 8,
        "searches": 8,
        "tolerance": 5.0,
        "deletes": 1,
        "message_windows": False,
        "numbered": 0,
        "identity_deletes": False,
        "identity_renames": False,
        "cut_calls": False,
        "scoped_lists": False,
        "step_windows": False,
        "content_polls": False,
    },
    sizes=("passages", "searches"),
    bounds={
        "passages": (1, 100),
        "searches": (1, 200),
        "tolerance": (0, 60),
        "deletes": (0, 50),
        "numbered": (0, 50),
    },
)
async def agent_surroundings(ctx: WorkloadContext) -> None:
    """Archives, search, identities and folders under faults; see the module docstring."""
    services, db = _start(ctx)
    client = Client(ctx, services, rng="surroundings-client")
    run = Surroundings(ctx, client, db)
    ctx.state["surroundings"] = run.log
    await run.run()
    log = run.log
    ctx.metric("surroundings.searches", len(log.searches))
    ctx.metric("surroundings.hits", sum(len(s.hits) for s in log.searches))
    ctx.metric("surroundings.identities", len(log.identity_list))
    ctx.metric(
        "surroundings.zero_queries", sum(s.zero_query and bool(s.hits) for s in log.searches)
    )
    ctx.metric("surroundings.numbered", len(log.numbered))
    ctx.metric("surroundings.uploads", sum(n is not None for _, n in log.uploads))
    ctx.metric("surroundings.schedules", sum(s.id is not None for s in log.schedules))
    ctx.metric("surroundings.message_windows", log.message_windows)
    ctx.metric("surroundings.step_windows", log.step_windows)
    ctx.metric(
        "surroundings.problems", len(check_surroundings(log, float(ctx.params["tolerance"])))
    )


@invariant
def surroundings_consistent(ctx: WorkloadContext) -> None:
    """Search ranks by cosine within the filters; keys name one identity; an identity's agents
    are the attached ones; folder names are unique; a detach leaves others' files."""
    problems = check_surroundings(ctx.state["surroundings"], float(ctx.params["tolerance"]))
    shown = "; ".join(problems[:5]) + (
        f"; ... ({len(problems)} in all)" if len(problems) > 5 else ""
    )
    assert not problems, shown
