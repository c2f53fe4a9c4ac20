"""Attachments that fail half-way: both sides of every link agree (``agent_links``, rtV).

An agent is attached to things it does not own (archives, identities, folders) by two records
that must say the same: the agent's record lists the thing (``archive_ids``, ``identity_ids``,
``folder_ids``), and a link key (``archiveagent/<archive>/<agent>``, ``identityagent/...``,
``folderagent/...``) lets the thing list its agents. Both are written in one transaction by the
agent's actor, so no failure may leave one without the other.

Server nodes (``topology.nodes``) share the database host, each running the production node
(its scheduler off; no model is called) with a runtime that tries each transaction
``storage_attempts`` times (1 here, so a refused write fails the attempt) and a service that
retries a failed request for ``request_timeout`` seconds (0.5 here). A client on ``main``
makes ``agents`` agents, two archives, two identities and two folders (retried until done), then
for ``rounds`` rounds attaches or detaches a random thing of a random kind to a random agent
**once**: a request that fails is not retried, as a client that gives up, which then waits
``settle`` seconds and reads both sides of the pair (the agent's list, then the thing's agents,
then the agent's list again: kept only if the two agent reads agree, so that nothing landed in
between). At the end it reads every agent (its lists) and every thing's agents (the links:
``list_agents(identity_id=...)``, the folder's agents, the archive's agents), and
:func:`links_agree` asks that each pair read is attached on both sides or on neither.

It judges only pairs whose agent and thing both exist (a delete removes the links in steps of
its own, and none happens here). It catches a link written in a transaction apart from the
agent's record, in either order, on attach or detach, for any kind (docs/oracles.md, "Both
sides of a link agree").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentStorageError,
    ArchiveStore,
    CreateAgent,
    FolderStore,
    IdentityStore,
    LoopConfig,
)
from kelpie_agent.errors import KelpieError
from kelpie_agent.service import AgentService, ServiceError, ServiceOptions
from kelpie_agent.service import _archives as archives
from kelpie_agent.service import _folders as folders

from ..scenario import WorkloadContext, invariant, workload
from ..shims import open_kv, sim_ports
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_schedules import _FAILURES, Client
from .agent_surroundings import _start as surroundings_start

__all__ = ["LinksLog", "agent_links", "link_problems", "links_agree"]

T = TypeVar("T")
KINDS = ("archive", "identity", "folder")


@attrs.define
class LinksLog:
    """What the client did and read back."""

    targets: dict[str, list[str]] = attrs.Factory(dict)  # kind -> ids made
    tries: list[tuple[str, str, str, bool, str]] = attrs.Factory(list)  # agent kind id attach how
    agent_side: dict[tuple[str, str], frozenset[str]] = attrs.Factory(dict)  # (agent, kind)
    thing_side: dict[tuple[str, str], frozenset[str]] = attrs.Factory(dict)  # (kind, id)
    agents: list[str] = attrs.Factory(list)
    # after a failed request: (agent, kind, thing, the agent lists it, the thing lists the agent)
    looks: list[tuple[str, str, str, bool, bool]] = attrs.Factory(list)


def link_problems(log: LinksLog) -> list[str]:
    """Every (agent, thing) pair attached on one side only (see the module docstring)."""
    problems = []
    for agent, kind, thing, lists, listed in log.looks:
        if lists != listed:
            side = "lists" if lists else "does not list"
            problems.append(
                f"after a failed request, agent {agent} {side} {kind} {thing}, whose agents "
                f"{'list' if listed else 'do not list'} it"
            )
    for kind, ids in sorted(log.targets.items()):
        for thing in ids:
            agents_of = log.thing_side.get((kind, thing))
            if agents_of is None:  # never read: nothing to judge
                continue
            for agent in log.agents:
                things_of = log.agent_side.get((agent, kind))
                if things_of is None:
                    continue
                if (thing in things_of) != (agent in agents_of):
                    side = "lists" if thing in things_of else "does not list"
                    other = "list" if agent in agents_of else "do not list"
                    tried = [t[3:] for t in log.tries if t[:3] == (agent, kind, thing)]
                    problems.append(
                        f"agent {agent} {side} {kind} {thing}, whose agents {other} it "
                        f"(tries, attach and outcome: {tried})"
                    )
    return problems


def _start(ctx: WorkloadContext) -> tuple[dict[str, AgentService], kelpie_dst.Node]:
    """The database host and the server nodes, as agent_surroundings starts them, but with a
    server that retries a failed request only briefly (the client sees the failure) and a
    runtime that tries each write ``storage_attempts`` times."""
    config = LoopConfig(storage_attempts=int(ctx.params["storage_attempts"]))
    options = ServiceOptions(request_timeout=float(ctx.params["request_timeout"]), scheduler=False)
    return surroundings_start(ctx, options, config)


class Links:
    def __init__(self, ctx: WorkloadContext, client: Client, db: kelpie_dst.Node) -> None:
        self.ctx = ctx
        self.client = client
        self.rng = ctx.rng("links")
        main = ctx.sim.current_node()
        assert main is not None
        kv, ports = open_kv(main, host=db), sim_ports(main)
        self.archives, self.identities = ArchiveStore(kv, ports), IdentityStore(kv, ports)
        self.folders = FolderStore(kv, ports)
        self.log = LinksLog()

    async def _until(self, call: Callable[[], Awaitable[T]]) -> T:
        """A store call (a read, or safe to repeat) until storage lets it through."""
        while True:
            try:
                return await call()
            except AgentStorageError:
                await trio.sleep(self.rng.uniform(0.5, 2.0))

    async def make(self) -> None:
        log, client = self.log, self.client
        for number in range(int(self.ctx.params["agents"])):
            request = CreateAgent(name=f"link-{number}")
            view = await client.until_done(lambda s, r=request: s.create_agent(r))  # type: ignore[misc]
            log.agents.append(view.agent.id)
        log.targets = {kind: [] for kind in KINDS}
        for name in ("shelf", "rack"):

            async def archive(s: AgentService, n: str = name) -> Any:
                found = await archives.list_archives(s, name=n)
                return found[0] if found else await archives.create_archive(s, n)

            log.targets["archive"].append((await client.until_done(archive)).id)
        for key in ("links-0", "links-1"):
            try:
                made = await self.identities.create(key, key.title())
            except (AgentStorageError, KelpieError):  # unknown outcome, or a lost answer
                continue
            log.targets["identity"].append(made.id)

        for name in ("binder", "tray"):

            async def folder(s: AgentService, n: str = name) -> Any:
                found = await folders.list_folders(s, name=n)
                return found[0] if found else await folders.create_folder(s, n)

            log.targets["folder"].append((await client.until_done(folder)).id)

    async def churn(self) -> None:
        """``rounds`` attaches and detaches, each sent once."""
        log, rng = self.log, self.rng
        for _ in range(int(self.ctx.params["rounds"])):
            kind = rng.choice([k for k in KINDS if log.targets[k]])
            agent, thing = rng.choice(log.agents), rng.choice(log.targets[kind])
            attach = rng.random() < 0.6
            call = _call(kind, attach, agent, thing)
            try:
                await self.client.once(call)
            except (*_FAILURES, ServiceError) as error:
                log.tries.append((agent, kind, thing, attach, type(error).__name__))
                await self.look(agent, kind, thing)  # what did the failed request leave?
                continue
            log.tries.append((agent, kind, thing, attach, "ok"))

    async def _agent_side(self, agent: str, kind: str) -> frozenset[str]:
        view = await self.client.until_done(lambda s: s.get_agent(agent))
        return frozenset(getattr(view.agent, f"{kind}_ids"))

    async def _thing_side(self, kind: str, thing: str) -> frozenset[str]:
        if kind == "archive":
            return frozenset(await self._until(lambda: self.archives.agents(thing)))
        if kind == "identity":
            views = await self.client.until_done(
                lambda s: s.list_agents(identity_id=thing, limit=50)
            )
            return frozenset(v.agent.id for v in views)
        return frozenset(await self.client.until_done(lambda s: folders.folder_agents(s, thing)))

    async def look(self, agent: str, kind: str, thing: str) -> None:
        """After a failed request, once the dust settled: both sides of its pair, kept only if
        the agent's side read the same before and after the thing's (nothing landed between)."""
        await trio.sleep(float(self.ctx.params["settle"]))
        before = await self._agent_side(agent, kind)
        linked = await self._thing_side(kind, thing)
        if await self._agent_side(agent, kind) == before:
            self.log.looks.append((agent, kind, thing, thing in before, agent in linked))

    async def read_back(self) -> None:
        log = self.log
        await trio.sleep(float(self.ctx.params["settle"]))
        for agent in log.agents:
            for kind in KINDS:
                log.agent_side[(agent, kind)] = await self._agent_side(agent, kind)
        for kind, things in log.targets.items():
            for thing in things:
                log.thing_side[(kind, thing)] = await self._thing_side(kind, thing)


def _call(kind: str, attach: bool, agent: str, thing: str) -> Callable[[AgentService], Any]:
    if kind == "folder":
        call = folders.attach_folder if attach else folders.detach_folder
        return lambda s: call(s, agent, thing)
    shared = archives.link if attach else archives.unlink
    return lambda s: shared(s, agent, kind, thing)  # type: ignore[arg-type]


@workload(
    params={
        "agents": 2,
        "rounds": 48,
        "storage_attempts": 1,
        "request_timeout": 20.0,
        "settle": 2.0,
    },
    sizes=("agents", "rounds"),
    bounds={
        "agents": (1, 8),
        "rounds": (1, 500),
        "storage_attempts": (1, 20),
        "request_timeout": (0.01, 120),
        "settle": (0, 60),
    },
)
async def agent_links(ctx: WorkloadContext) -> None:
    """Attach and detach shared things once each under faults; see the module docstring."""
    services, db = _start(ctx)
    run = Links(ctx, Client(ctx, services, rng="links-client"), db)
    ctx.state["links"] = run.log
    await run.make()
    await run.churn()
    await run.read_back()
    log = run.log
    ctx.metric("links.tries", len(log.tries))
    ctx.metric("links.failed", sum(t[4] != "ok" for t in log.tries))
    for kind in KINDS:
        ctx.metric(f"links.{kind}_tries", sum(t[1] == kind for t in log.tries))
        ctx.metric(f"links.{kind}_ok", sum(t[1] == kind and t[4] == "ok" for t in log.tries))
    ctx.metric("links.looks", len(log.looks))
    ctx.metric("links.attached", sum(len(v) for v in log.thing_side.values()))
    ctx.metric("links.problems", len(link_problems(log)))


@invariant
def links_agree(ctx: WorkloadContext) -> None:
    """Every agent and shared thing (archive, identity, folder) that both exist are attached
    on both sides or on neither: the agent's record and the thing's list of agents agree."""
    problems = link_problems(ctx.state["links"])
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
