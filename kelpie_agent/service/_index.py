"""The agent index: listing agents in creation order, and repairing the index.

Entries (``svc/agents/<created µs>/<agent id>``, see ``_records``) are written by the agents'
own transactions, so they agree with the agent records exactly. :func:`scan_index` pages
through them with Letta's cursor semantics; :func:`repair` rebuilds entries for agent records
written without the service (data from before it, or a bare ``AgentActor``) and sweeps what a
crash in the middle of a multi-transaction delete left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from kelpie_agent.agent import Keys, Reader
from kelpie_agent.agent._codec import unpack
from kelpie_agent.storage import KV

from ._records import INDEX, IndexEntry, decode, encode, index_entry

__all__ = ["RepairReport", "Window", "repair", "scan_index", "window"]

_CHUNK = 200
# Per-agent prefixes (``<prefix><agent id>/...``); ``session/<id>`` goes with the agent record.
# ``svc/otid/`` and ``svc/run/`` held otid and run records before the agent core kept them.
_RUN_INDEX = b"runs/"
_PER_AGENT = (
    b"msg/",
    b"msgid/",
    b"passage/",
    b"passageid/",
    b"otid/",
    _RUN_INDEX,
    b"svc/otid/",
    b"svc/run/",
)


def _end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (a non-empty ASCII one)."""
    end = Keys.prefix_end(prefix)
    assert end is not None
    return end


@attrs.frozen
class Window:
    """Which part of an ordered collection a page covers, in storage (ascending) terms:
    strictly between ``low`` and ``high``; ``from_high``: take the items nearest ``high``;
    ``reverse``: then flip them to get the listing order."""

    low: str | None
    high: str | None
    from_high: bool
    reverse: bool


def window(descending: bool, after: str | None, before: str | None) -> Window:
    """Letta's cursors: ``after``/``before`` are relative to the *listing* order (so a client
    pages with ``after=<last id>`` whatever the order). A page holds the items nearest
    ``after``, or nearest ``before`` when only ``before`` is given."""
    low, high = (before, after) if descending else (after, before)
    near_before = before is not None and after is None
    from_high = descending != near_before
    return Window(low, high, from_high, reverse=from_high != descending)


async def scan_index(
    read: Reader,
    *,
    low: bytes | None,
    high: bytes | None,
    from_high: bool,
    limit: int,
    keep: Callable[[IndexEntry], bool],
) -> list[IndexEntry]:
    """Up to ``limit`` entries strictly between the keys ``low`` and ``high`` that ``keep``
    accepts, nearest ``high`` first if ``from_high``, else nearest ``low`` first."""
    start = low + b"\x00" if low is not None else INDEX
    end = high if high is not None else _end(INDEX)
    found: list[IndexEntry] = []
    while len(found) < limit and start < end:
        rows = await read.scan(start, end, "the agent index", limit=_CHUNK, reverse=from_high)
        for _, value in rows:
            entry: IndexEntry = decode(IndexEntry, value)
            if keep(entry):
                found.append(entry)
                if len(found) == limit:
                    break
        if len(rows) < _CHUNK:
            break
        if from_high:
            end = rows[-1][0]
        else:
            start = rows[-1][0] + b"\x00"
    return found


@attrs.frozen
class RepairReport:
    """What :func:`repair` fixed (all zero on a store only the service wrote)."""

    agents: int = 0
    entries_added: int = 0
    entries_removed: int = 0
    orphans_swept: int = 0  # agents whose leftover records were deleted


async def _all(read: Reader, prefix: bytes) -> list[tuple[bytes, bytes]]:
    rows: list[tuple[bytes, bytes]] = []
    start, end = prefix, _end(prefix)
    while True:
        page = await read.scan(start, end, "records", limit=_CHUNK)
        rows.extend(page)
        if len(page) < _CHUNK:
            return rows
        start = page[-1][0] + b"\x00"


async def _owners(read: Reader, prefix: bytes) -> list[str]:
    """The agent ids that have keys under ``prefix<agent>/``: one read per agent."""
    owners: list[str] = []
    start, end = prefix, _end(prefix)
    while start < end:
        rows = await read.scan(start, end, "records", limit=1)
        if not rows:
            break
        owner = rows[0][0][len(prefix) :].decode().split("/", 1)[0]
        owners.append(owner)
        start = _end(prefix + f"{owner}/".encode())
    return owners


async def repair(kv: KV, read: Reader) -> RepairReport:
    """Make the index match the agent records, and delete the records of deleted agents.

    Every fix is a transaction that re-reads the agent record it depends on, so it serializes
    with the agents' own transactions: running it while agents are busy is safe.
    """
    fixes: dict[str, int] = {"added": 0, "removed": 0}
    swept = 0
    agents = [unpack(value) for _, value in await _all(read, Keys.AGENTS)]
    expected = {agent.id: index_entry(agent) for agent in agents}
    for entry in expected.values():
        if await read.get(entry.key, "an index entry") != encode(entry):
            _count(fixes, await _fix(kv, read, entry.agent_id, entry.key))
    for key, value in await _all(read, INDEX):
        entry = decode(IndexEntry, value)
        live = expected.get(entry.agent_id)
        if live is None or live.key != key:
            _count(fixes, await _fix(kv, read, entry.agent_id, key))
    for prefix in _PER_AGENT:
        for owner in await _owners(read, prefix):
            if owner in expected or await _live_conversation(read, owner, expected):
                continue
            if await _sweep(kv, read, owner, prefix):
                swept += 1
    return RepairReport(len(agents), fixes["added"], fixes["removed"], swept)


def _count(fixes: dict[str, int], what: str | None) -> None:
    if what is not None:
        fixes[what] += 1


async def _fix(kv: KV, read: Reader, agent_id: str, entry_key: bytes) -> str | None:
    """Make ``entry_key`` right for the agent's current record: written if it is that agent's
    entry, deleted if not. Returns ``added``, ``removed`` or None (nothing to do)."""

    async def fix() -> str | None:
        async with kv.transaction() as txn:
            raw = await txn.get(Keys(agent_id).agent)
            current = await txn.get(entry_key)
            entry = index_entry(unpack(raw)) if raw is not None else None
            if entry is not None and entry.key == entry_key:
                if current == encode(entry):
                    return None
                await txn.set(entry_key, encode(entry))
                return "added"
            if current is None:
                return None
            await txn.delete(entry_key)
            return "removed"

    return await read(fix, "an index repair")


async def _live_conversation(read: Reader, owner: str, agents: Mapping[str, object]) -> bool:
    """Whether ``owner`` is a conversation of a live agent: a conversation's history, otid
    records and session are kept under its own id, as an agent's are (``Keys(conv.id)``)."""
    data = await read.get(Keys.conversation(owner), "a conversation")
    return data is not None and str(unpack(data).agent_id) in agents


async def _sweep(kv: KV, read: Reader, agent_id: str, prefix: bytes) -> bool:
    """Delete ``prefix<agent>/...`` of an agent that does not exist (each batch in a
    transaction that checks it still does not, and that it is no conversation)."""
    own = prefix + f"{agent_id}/".encode()
    agent_key = Keys(agent_id).agent
    conversation_key = Keys.conversation(agent_id)
    any_deleted = False
    while True:
        rows = await read.scan(own, _end(own), "leftover records", limit=_CHUNK)
        if not rows:
            return any_deleted

        async def attempt(rows: list[tuple[bytes, bytes]] = rows) -> bool:
            async with kv.transaction() as txn:
                if await txn.get(agent_key) is not None:
                    return False  # created again meanwhile
                conversation = await txn.get(conversation_key)
                if conversation is not None:
                    owner = Keys(str(unpack(conversation).agent_id)).agent
                    if await txn.get(owner) is not None:
                        return False  # a conversation of a live agent
                for key, _ in rows:
                    await txn.delete(key)
                    if prefix == _RUN_INDEX:  # the index names the run record
                        await txn.delete(Keys.run(key.rsplit(b"/", 1)[1].decode()))
                return True

        if not await read(attempt, "a sweep of deleted records"):
            return any_deleted
        any_deleted = True
