"""Collections larger than any page the server reads them in, under faults (``agent_collections``).

Server nodes (``topology.nodes``) share the database host ``topology.database``. A client on
``main`` (the service's Python API, as ``agent_lifecycle``'s does) creates ``agents`` memgpt
agents, ``width`` at a time, each with three blocks and the tags ``bulk`` and ``bulk-0`` or
``bulk-1``. Then it reads:

1. the agents and the blocks: in one request each way, and walked by ``after`` cursors in
   pages of ``page``; the agents tagged ``bulk-1``;
2. every acknowledged agent's history, then runs ``repair`` (as ``kelpie serve`` does at
   every start) and reads the listing and each history again;
3. with ``history`` > 0: an agent file of the first agent, its history lengthened by
   ``history`` notes, imported as a new agent; its history in one request and walked both
   ways; a search (of that agent and of every agent) for the last note's word; its export;
   a reset of its messages, then the notes read by id. Then the same file imported once
   more, that copy deleted, and its notes read by id.

:func:`._collections_checks.check_collections` judges it all. The sizes default past every chunk the
server reads in (200 agent-index and record keys, 500 runtime keys, 200 deletes a
transaction); see docs/scenarios.md.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kelpie_agent.agent import BlockCreate, CreateAgent
from kelpie_agent.service import AgentService, NotFoundError
from kelpie_agent.service import _portability as portability

from ..scenario import WorkloadContext, invariant, workload
from ._agent_schedules import _FAILURES, Client, start_servers
from ._collections_checks import CollectionsLog, Listing, check_collections

__all__ = ["agent_collections", "collections_whole"]

ALL = 1000  # the largest page the API serves
TAGS = ("bulk-0", "bulk-1")
SETTLE = 70.0  # seconds: longer than the client's timeout of one attempt


@workload(
    params={"agents": 205, "width": 8, "page": 50, "history": 520},
    sizes=("agents",),
    bounds={"agents": (1, 900), "width": (1, 64), "page": (1, ALL), "history": (0, 900)},
)
async def agent_collections(ctx: WorkloadContext) -> None:
    """Large collections read whole; see the module docstring."""
    log = CollectionsLog(page=int(ctx.params["page"]))
    ctx.state["collections"] = log
    services, _ = start_servers(ctx)
    client = Client(ctx, services, "bulk")
    await _create_all(client, log, int(ctx.params["agents"]), int(ctx.params["width"]))
    # A create the client gave up on (its 60 s timeout) may still land; let it, so that each
    # reading below sees one store.
    await trio.sleep(SETTLE)
    agents = await _list_agents(client, log, "agents")
    for tag in TAGS:
        listed = await client.until_done(
            lambda s, t=tag: s.list_agents(tags=[t], limit=ALL, order="asc")  # type: ignore[misc]
        )
        wanted = tuple(v.agent.id for v in agents if tag in v.agent.tags)
        log.tagged.append((tag, tuple(v.agent.id for v in listed), wanted))
    await _list(client, log, "blocks", lambda s, **kw: s.list_blocks(**kw))
    histories = {a: await _history_ids(client, a) for a in _either_side(log.acked)}
    log.before_repair = tuple(v.agent.id for v in agents)
    await client.until_done(lambda s: s.repair())
    after = await client.until_done(lambda s: s.list_agents(limit=ALL, order="asc"))
    log.after_repair = tuple(v.agent.id for v in after)
    for agent_id, was in histories.items():
        log.histories[agent_id] = (was, await _history_ids(client, agent_id))
    if int(ctx.params["history"]) and log.acked:
        await _long_history(client, log, int(ctx.params["history"]))
    ctx.metric("collections.agents", len(log.acked))
    ctx.metric("collections.listed", len(log.after_repair))
    ctx.metric("collections.notes", len(log.notes))
    ctx.metric("collections.problems", len(check_collections(log)))


async def _create_all(client: Client, log: CollectionsLog, count: int, width: int) -> None:
    """``count`` agents, ``width`` creates at a time; ``log.acked`` in number order."""
    made: dict[int, tuple[str, tuple[str, ...]]] = {}
    numbers = iter(range(count))

    async def creator() -> None:
        for number in numbers:
            request = CreateAgent(
                name=f"bulk-{number}",
                agent_type="memgpt_agent",
                tags=("bulk", TAGS[number % 2]),
                memory_blocks=(
                    BlockCreate("persona", f"I am bulk agent {number}."),
                    BlockCreate("human", f"The human of bulk agent {number}."),
                    BlockCreate("notes", f"Notes of bulk agent {number}."),
                ),
            )
            view = await client.until_done(lambda s, r=request: s.create_agent(r))  # type: ignore[misc]
            made[number] = (view.agent.id, tuple(b.id for b in view.blocks))

    async with trio.open_nursery() as nursery:
        for _ in range(width):
            nursery.start_soon(creator)
    for number in sorted(made):
        agent_id, blocks = made[number]
        log.acked.append(agent_id)
        log.blocks += blocks


async def _list_agents(client: Client, log: CollectionsLog, what: str) -> list[Any]:
    """The agents, oldest first, as one request lists them (after judging every reading)."""
    views: list[Any] = []

    async def page(s: AgentService, **kw: Any) -> list[Any]:
        got = await s.list_agents(**kw)
        if kw.get("limit") == ALL and kw.get("order") == "asc":
            views[:] = got
        return [v.agent for v in got]

    await _list(client, log, what, page)
    return views


async def _list(
    client: Client,
    log: CollectionsLog,
    what: str,
    call: Callable[..., Awaitable[list[Any]]],
) -> Listing:
    """``what`` read in one request each way and walked by ``after`` cursors in pages."""
    size = log.page
    full = await client.until_done(lambda s: call(s, limit=ALL, order="asc"))
    desc = await client.until_done(lambda s: call(s, limit=ALL, order="desc"))
    walk: list[str] = []
    pages: list[int] = []
    after: str | None = None
    while len(pages) <= ALL // size + 2:  # a walk that never ends is judged by its length
        got = await client.until_done(
            lambda s, a=after: call(s, limit=size, order="asc", after=a)  # type: ignore[misc]
        )
        walk += [x.id for x in got]
        pages.append(len(got))
        if len(got) < size:
            break
        after = got[-1].id
    seen = Listing(
        f"{what} ({len(log.listings)})",
        tuple(x.id for x in full),
        tuple(x.id for x in desc),
        tuple(walk),
        tuple(pages),
        size,
    )
    log.listings.append(seen)
    return seen


async def _history_ids(client: Client, agent_id: str) -> tuple[str, ...]:
    got = await client.until_done(
        lambda s: s.list_messages(agent_id, limit=ALL, order="asc", use_assistant_message=False)
    )
    return tuple(m.id for m in got)


NOTE_WORDS = "bulk note"


def _note(k: int) -> str:
    return f"{NOTE_WORDS} {k}: the word is kelpword{k:04d}"


def _lengthened(file: dict[str, Any], notes: tuple[str, ...], name: str) -> bytes:
    """The agent file ``file`` with ``notes`` appended to its agent's history as user
    messages, and its agent renamed."""
    agent = file["agents"][0]
    agent["name"] = name
    messages = agent["messages"]
    start = len(messages)
    for k, text in enumerate(notes):
        item = dict(messages[0])
        item.update(
            {
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "id": f"message-{start + k}",
                "otid": None,
                "tool_calls": None,
                "tool_call_id": None,
                "tool_returns": [],
            }
        )
        messages.append(item)
    agent["in_context_message_ids"] = [m["id"] for m in messages[:start]]
    return json.dumps(file, default=str).encode()


async def _import(client: Client, raw: bytes) -> tuple[str, list[Any]]:
    """The agent an import of ``raw`` made (a retried import may leave another copy), and its
    history's user messages, oldest first."""
    ids = await client.until_done(lambda s: portability.import_agent_file_to(s, raw))
    agent_id = ids[0]
    got = await client.until_done(
        lambda s: s.list_messages(agent_id, limit=ALL, order="asc", use_assistant_message=False)
    )
    return agent_id, [m for m in got if m.message_type == "user_message"]


async def _long_history(client: Client, log: CollectionsLog, count: int) -> None:
    log.notes = tuple(_note(k) for k in range(count))
    source = log.acked[0]
    file = await client.until_done(lambda s: portability.export_agent_file(s, source))
    raw = _lengthened(file, log.notes, "bulk-long")
    big, users = await _import(client, raw)
    log.big, log.big_texts = big, tuple(m.content for m in users)
    await _list(
        client,
        log,
        "messages of the imported agent",
        lambda s, **kw: s.list_messages(big, use_assistant_message=False, **kw),
    )
    word = log.notes[-1].rsplit(" ", 1)[1]
    for owner in (big, None):
        found = await client.until_done(
            lambda s, o=owner: s.search_messages(word, agent_id=o, mode="fts", limit=10)  # type: ignore[misc]
        )
        log.found += tuple(getattr(m, "content", "") for _, m in found)
    exported = await client.until_done(lambda s: portability.export_agent_file(s, big))
    texts = {
        c.get("text")
        for m in exported["agents"][0]["messages"]
        if m["role"] == "user"
        for c in m["content"]
    }
    log.exported = sum(1 for note in log.notes if note in texts)
    fork, forked = await _fork(client, log, big)
    await client.until_done(lambda s: s.reset_messages(big))
    await _leftovers(client, log, "a reset of the imported agent", big, _note_ids(log, users))
    while True:
        try:
            await client.until_done(lambda s: s.delete_conversation(fork))
        except NotFoundError:
            break  # gone, by this attempt or a lost earlier one
    await _leftovers(client, log, "a delete of a fork", big, forked, fork)
    copy, users = await _import(client, raw)
    while True:
        try:
            await client.until_done(lambda s: s.delete_agent(copy))
        except NotFoundError:
            break  # gone, by this attempt or a lost earlier one
    await _leftovers(client, log, "a delete of another import", copy, _note_ids(log, users))


def _note_ids(log: CollectionsLog, users: list[Any]) -> list[str]:
    notes = set(log.notes)
    return [m.id for m in users if m.content in notes]


BOUNDARIES = (64, 100, 128, 200, 256, 500)
"""Chunk sizes a server reads or writes its keys in (Kelpie's are 64, 100, 200 and 500)."""


async def _fork(client: Client, log: CollectionsLog, agent: str) -> tuple[str, list[str]]:
    """A fork of ``agent``'s long history (a lost fork may leave another), which must hold
    every note in order: its id and its notes' ids."""
    while True:
        try:
            fork = await client.once(lambda s: s.fork_conversation("default", agent_id=agent))
            break
        except _FAILURES:
            await trio.sleep(client.rng.uniform(0.5, 2.0))
    try:
        await _list(
            client,
            log,
            "messages of a fork",
            lambda s, **kw: s.list_messages(
                agent, conversation_id=fork.id, use_assistant_message=False, **kw
            ),
        )
        got = await client.until_done(
            lambda s: s.list_messages(
                agent, conversation_id=fork.id, limit=ALL, order="asc", use_assistant_message=False
            )
        )
    except NotFoundError as error:
        log.fork_lost = f"{fork.id}: {error}"
        return fork.id, []
    users: list[Any] = [m for m in got if m.message_type == "user_message"]
    log.forked = tuple(m.content for m in users)
    return fork.id, _note_ids(log, users)


def _probes(ids: list[str], boundaries: tuple[int, ...] = BOUNDARIES) -> list[str]:
    """The first and last of ``ids`` and those either side of every chunk boundary."""
    picks = {i for b in boundaries for i in (b - 1, b)} | {0, len(ids) - 1}
    return [ids[i] for i in sorted(picks) if 0 <= i < len(ids)]


def _either_side(agent_ids: list[str]) -> list[str]:
    """The agents either side of every chunk boundary in the order their records are stored
    (by id), where a scan of them pages: a scan that stops a chunk early loses those past it
    (reading every history would cost more than the rest of the run)."""
    return _probes(sorted(agent_ids))


async def _leftovers(
    client: Client,
    log: CollectionsLog,
    when: str,
    agent: str,
    ids: list[str],
    conversation: str | None = None,
) -> None:
    """What is still readable of the notes ``ids`` after ``when`` deleted them: by id (those
    either side of each chunk boundary), in the history, and in a search of every agent's
    messages for the words all notes share (the search reads the stored messages
    themselves, so a message whose id record went but whose record stayed shows there)."""
    readable = []
    for message_id in _probes(ids, (200, 500)):  # a read by id asks every agent: costly
        try:
            await client.until_done(lambda s, m=message_id: s.get_message(m))  # type: ignore[misc]
        except NotFoundError:
            continue
        readable.append(message_id)
    try:
        got = await client.until_done(
            lambda s: s.list_messages(
                agent, conversation_id=conversation, limit=ALL, use_assistant_message=False
            )
        )
    except NotFoundError:
        got = []
    notes = set(log.notes)
    in_history = sum(1 for m in got if getattr(m, "content", None) in notes)
    found = await client.until_done(lambda s: s.search_messages(NOTE_WORDS, mode="fts", limit=ALL))
    doomed = set(ids)
    readable += [m.id for _, m in found if m.id in doomed and m.id not in set(readable)]
    log.leftovers.append((when, tuple(readable), in_history))


@invariant
def collections_whole(ctx: WorkloadContext) -> None:
    """Listings, repair and a long history read whole; see
    :func:`._collections_checks.check_collections`."""
    problems = check_collections(ctx.state["collections"])
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
