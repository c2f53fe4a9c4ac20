"""The admin API under faults: renames, shared archives, agent files (``agent_admin``).

Server nodes (``topology.nodes``) share the database host ``topology.database``, each running
the production node. A client on ``main`` creates ``agents`` agents (a read-only ``persona``
block and a ``human`` block, each with its own limit), gives each a shared archive attached to
it, then for ``span`` seconds, per agent, on random live nodes: renames it and changes its
tags, adds passages to its archive, and exports it to an agent file and imports that file as a
new agent. Nobody talks to the agents, so their blocks stay what they were made with. At the
end it reads everything back through the service and :func:`._agent_admin_checks.check_admin`
judges it: an acknowledged rename shows in the agent and in the agents list by name and by
tag, an acknowledged passage is listed by every agent its archive is attached to, and an
imported agent has its source's blocks (label, value, limit, read-only). Each passage carries
one of three tags; a search filtered by a tag must return ``min(top_k, passages listed with
that tag)`` hits, each with the tag (:func:`._agent_admin_checks.check_searches`).

The agent workload never exercises these parts (the session-8 blind test of issue #13 found
bugs in all three that no scenario could see): this scenario is where they run.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio

from kelpie_agent.agent import BlockCreate, CreateAgent
from kelpie_agent.service import _archives as archives
from kelpie_agent.service import _portability as portability

from ..scenario import WorkloadContext, invariant, workload
from ._agent_admin_checks import BlockShape, Final, Rename, check_admin, check_searches
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_schedules import _FAILURES, Client, start_servers

__all__ = ["admin_consistent", "agent_admin"]

KINDS = ("red", "green", "blue")  # passage k of an archive is tagged KINDS[k % 3]
SEARCH_TOP_K = 3


@attrs.define
class AdminLog:
    renames: list[Rename] = attrs.Factory(list)
    archived: dict[str, list[str]] = attrs.Factory(dict)  # archive -> acknowledged texts
    attached: dict[str, list[str]] = attrs.Factory(dict)  # archive -> agents
    imports: dict[str, tuple[str, list[BlockShape]]] = attrs.Factory(dict)
    final: Final = attrs.Factory(Final)


def _blocks(number: int) -> list[BlockShape]:
    """Agent ``number``'s blocks as it is made (and as every file of it must carry them)."""
    return [
        BlockShape("persona", f"I am admin agent {number}. Ünïcode stays.", 400 + number, True),
        BlockShape("human", f"The human of agent {number}.", 300 + number, False),
    ]


async def _make_agent(client: Client, log: AdminLog, number: int) -> tuple[str, str]:
    """A new agent with its shared archive attached: ``(agent id, archive id)``."""
    request = CreateAgent(
        name=f"admin-{number}",
        memory_blocks=tuple(
            BlockCreate(b.label, b.value, limit=b.limit, read_only=b.read_only)
            for b in _blocks(number)
        ),
    )
    view = await client.until_done(lambda s: s.create_agent(request))
    agent_id = view.agent.id
    archive = await client.until_done(lambda s: archives.create_archive(s, f"shared-{number}"))
    await client.until_done(lambda s: archives.attach_archive(s, agent_id, archive.id))
    log.attached[archive.id] = [agent_id]
    log.archived[archive.id] = []
    return agent_id, archive.id


async def _rename(client: Client, log: AdminLog, agent_id: str, number: int, k: int) -> None:
    name, tags = f"admin-{number}-v{k}", (f"tag-{number}-{k}",)
    changes = {"name": name, "tags": list(tags)}
    try:
        await client.once(lambda s: s.update_agent(agent_id, changes))
    except _FAILURES:
        log.renames.append(Rename(agent_id, name, tags, "unknown"))
        return
    log.renames.append(Rename(agent_id, name, tags, "ok"))


async def _add_passage(client: Client, log: AdminLog, archive: str, number: int, k: int) -> None:
    text = f"archive note {number}.{k}"
    items: list[archives.PassageItem] = [(text, (KINDS[k % len(KINDS)],), {}, None)]
    try:
        await client.once(lambda s: archives.add_archive_passages(s, archive, items))
    except _FAILURES:
        return
    log.archived[archive].append(text)


async def _round_trip(client: Client, log: AdminLog, agent_id: str, number: int) -> None:
    try:
        file = await client.once(lambda s: portability.export_agent_file(s, agent_id))
        raw = json.dumps(file, default=str).encode()
        new_ids = await client.once(lambda s: portability.import_agent_file_to(s, raw))
    except _FAILURES:
        return
    for new in new_ids:
        log.imports[new] = (agent_id, _blocks(number))


async def _agent_client(
    client: Client, log: AdminLog, agent_id: str, archive: str, number: int, span: float
) -> None:
    rng, k = client.rng, 0
    deadline = trio.current_time() + span
    while trio.current_time() < deadline:
        k += 1
        roll = rng.random()
        if roll < 0.4:
            await _rename(client, log, agent_id, number, k)
        elif roll < 0.75:
            await _add_passage(client, log, archive, number, k)
        else:
            await _round_trip(client, log, agent_id, number)
        await trio.sleep(rng.uniform(1, 5))


async def _read_back(client: Client, log: AdminLog, agent_ids: list[str]) -> None:
    final = log.final
    for agent_id in agent_ids:
        view = await client.until_done(lambda s, a=agent_id: s.get_agent(a))  # type: ignore[misc]
        final.names[agent_id] = (view.agent.name, tuple(view.agent.tags))
        passages = await client.until_done(
            lambda s, a=agent_id: s.list_passages(a, limit=1000)  # type: ignore[misc]
        )
        final.passages[agent_id] = [p.text for p in passages]
        for kind in KINDS:
            final.tagged[(agent_id, kind)] = [p.text for p in passages if kind in p.tags]
            hits = await client.until_done(
                lambda s, a=agent_id, t=kind: s.search_passages(  # type: ignore[misc]
                    a, "archive note", tags=[t], top_k=SEARCH_TOP_K
                )
            )
            final.found[(agent_id, kind)] = [(h.passage.text, h.passage.tags) for h in hits]
    for r in log.renames:
        if r.name not in final.by_name:
            found = await client.until_done(lambda s, n=r.name: s.list_agents(name=n))  # type: ignore[misc]
            final.by_name[r.name] = [v.agent.id for v in found]
        for tag in r.tags:
            if tag not in final.by_tags:
                found = await client.until_done(lambda s, t=tag: s.list_agents(tags=[t]))  # type: ignore[misc]
                final.by_tags[tag] = [v.agent.id for v in found]
    for new in log.imports:
        blocks = await client.until_done(lambda s, a=new: s.list_agent_blocks(a))  # type: ignore[misc]
        final.blocks[new] = [BlockShape(b.label, b.value, b.limit, b.read_only) for b in blocks]


@workload(
    params={"agents": 3, "span": 60.0},
    sizes=("agents",),
    bounds={"agents": (1, 50), "span": (1, 3600)},
)
async def agent_admin(ctx: WorkloadContext) -> None:
    """Renames, shared archives and agent files under faults; see the module docstring."""
    log = AdminLog()
    ctx.state["log"] = log
    services, _ = start_servers(ctx)
    client = Client(ctx, services, "admin")
    made = [await _make_agent(client, log, n) for n in range(int(ctx.params["agents"]))]
    span = float(ctx.params["span"])
    async with trio.open_nursery() as nursery:
        for number, (agent_id, archive) in enumerate(made):
            nursery.start_soon(_agent_client, client, log, agent_id, archive, number, span)
    await _read_back(client, log, [agent_id for agent_id, _ in made])
    ctx.metric("admin.renames", sum(r.outcome == "ok" for r in log.renames))
    ctx.metric("admin.passages", sum(len(t) for t in log.archived.values()))
    ctx.metric("admin.imports", len(log.imports))


@invariant
def admin_consistent(ctx: WorkloadContext) -> None:
    """Renames, archive passages and agent files are what was acknowledged; see
    :func:`._agent_admin_checks.check_admin`."""
    log: Any = ctx.state["log"]
    problems = check_admin(log.renames, log.archived, log.attached, log.imports, log.final)
    problems += check_searches(log.final, SEARCH_TOP_K)
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
