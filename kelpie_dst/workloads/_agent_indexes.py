"""The store agrees with itself: every secondary index names exactly its records (session 17).

Several records of kelpie_agent are found through a second key written *in the same
transaction* as the record itself, and removed in the same transaction as it:

* the agent list's index, ``svc/agents/<created µs>/<agent>`` (an :class:`IndexEntry`: the
  agent's name and tags, for the list's filters), written by ``RecordingTransaction`` whenever
  the agent record ``agent/<id>`` is written or deleted (``kelpie_agent/service/_records.py``);
* an identity's key, ``identitykey/<identifier_key>`` -> the identity id, written with
  ``identity/<id>`` by ``IdentityStore.create`` and moved by ``update`` when the key changes;
* a shared archive's passage index, ``apassageid/<passage>`` -> the archive id, written and
  deleted with ``apassage/<archive>/<passage>`` (``kelpie_agent/agent/_archives.py``).

So whatever crashed, failed or retried, the committed store must hold each index exactly as
its records say: an entry for every record, equal to what the record makes of it, and no entry
whose record is gone or says otherwise. :func:`index_problems` reads the database host's store
directly (the same store ``memory_matches_storage`` audits), awaits nothing and draws nothing,
so it moves no seed; ``memory_matches_storage`` runs it once the run is over.

It catches, whichever line the slip is on: a delete that forgets the index (a deleted agent
still listed, a deleted passage still found by id), an index written on create only (a renamed
agent listed under its old name), an identity key change that leaves the old key naming it (the
old key is never free again), an index entry keyed by the wrong field. It judges only indexes
whose writes share the record's transaction: the message-id index and the attachment links
(``identityagent/``, ``archiveagent/``) are deleted in steps of their own when an agent or an
identity is deleted, so a crash may leave them for a later retry to finish.
"""

from __future__ import annotations

from typing import Any

from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import unpack
from kelpie_agent.service._records import INDEX, IndexEntry, decode, encode, index_entry
from kelpie_agent.storage import ChecksumError

__all__ = ["index_problems"]

_IDENTITIES = b"identity/"
_IDENTITY_KEYS = b"identitykey/"
_ARCHIVE_PASSAGES = b"apassage/"
_ARCHIVE_PASSAGE_IDS = b"apassageid/"
_MAX = 12


def _end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _rows(store: Any, prefix: bytes) -> list[tuple[bytes, bytes]]:
    """The readable rows under ``prefix`` (a frame that fails its checksum is skipped: the
    storage.corruption fault, not judged here)."""
    rows: list[tuple[bytes, bytes]] = []
    for key in store._data.irange(prefix, _end(prefix), inclusive=(True, False)):
        try:
            value = store._get(key)
        except ChecksumError:
            continue
        if value is not None:
            rows.append((key, value))
    return rows


def _get(store: Any, key: bytes) -> tuple[bool, bytes | None]:
    """(readable, value) of one key."""
    try:
        return True, store._get(key)
    except ChecksumError:
        return False, None


def index_problems(store: Any) -> list[str]:
    """What the committed store's indexes say that their records do not (see the module).
    A store that is not a SimKVStore (an SQLite file) is not judged."""
    if not hasattr(store, "_data") or not hasattr(store, "_get"):
        return []
    problems: list[str] = []
    problems += _agent_index(store)
    problems += _identity_keys(store)
    problems += _archive_passages(store)
    return problems[:_MAX]


def _agent_index(store: Any) -> list[str]:
    problems: list[str] = []
    agents: dict[str, Any] = {}
    for _, raw in _rows(store, Keys.AGENTS):
        record = unpack(raw)
        agents[record.id] = record
    for agent_id, record in agents.items():
        entry = index_entry(record)
        readable, stored = _get(store, entry.key)
        if not readable:
            continue
        if stored is None:
            problems.append(f"agent {agent_id} ({record.name!r}) has no entry in the agent index")
        elif stored != encode(entry):
            old = decode(IndexEntry, stored)
            problems.append(
                f"agent {agent_id}: its index entry says name {old.name!r}, tags "
                f"{list(old.tags)}; the record says {entry.name!r}, {list(entry.tags)}"
            )
    for key, raw in _rows(store, INDEX):
        entry = decode(IndexEntry, raw)
        record = agents.get(entry.agent_id)
        if record is None:
            if not _get(store, Keys(entry.agent_id).agent)[0]:
                continue  # the record is there but unreadable
            problems.append(
                f"the agent index lists {entry.agent_id} ({entry.name!r}), which has no agent "
                "record (deleted, or never made)"
            )
        elif index_entry(record).key != key:
            problems.append(f"the agent index lists {entry.agent_id} under a stale key {key!r}")
    return problems


def _identity_keys(store: Any) -> list[str]:
    problems: list[str] = []
    identities: dict[str, Any] = {}
    for _, raw in _rows(store, _IDENTITIES):
        record = unpack(raw)
        identities[record.id] = record
    for identity_id, record in identities.items():
        readable, stored = _get(store, _IDENTITY_KEYS + record.identifier_key.encode())
        if readable and (stored is None or unpack(stored) != identity_id):
            named = None if stored is None else unpack(stored)
            problems.append(
                f"identity {identity_id}'s key {record.identifier_key!r} names {named!r}, not it"
            )
    for key, raw in _rows(store, _IDENTITY_KEYS):
        named = unpack(raw)
        identifier_key = key[len(_IDENTITY_KEYS) :].decode()
        record = identities.get(named)
        if record is None:
            if not _get(store, _IDENTITIES + str(named).encode())[0]:
                continue
            problems.append(f"identity key {identifier_key!r} names {named}, which does not exist")
        elif record.identifier_key != identifier_key:
            problems.append(
                f"identity key {identifier_key!r} still names {named}, whose key is now "
                f"{record.identifier_key!r}: the old key can never be taken again"
            )
    return problems


def _archive_passages(store: Any) -> list[str]:
    problems: list[str] = []
    stored: dict[str, str] = {}  # passage -> the archive whose key holds it
    for key, _ in _rows(store, _ARCHIVE_PASSAGES):
        archive_id, _, passage_id = key[len(_ARCHIVE_PASSAGES) :].decode().partition("/")
        stored[passage_id] = archive_id
    indexed: dict[str, str] = {}
    for key, raw in _rows(store, _ARCHIVE_PASSAGE_IDS):
        indexed[key[len(_ARCHIVE_PASSAGE_IDS) :].decode()] = unpack(raw)
    for passage_id, archive_id in stored.items():
        readable, _ = _get(store, _ARCHIVE_PASSAGE_IDS + passage_id.encode())
        if readable and indexed.get(passage_id) != archive_id:
            problems.append(
                f"archive {archive_id}'s passage {passage_id} is indexed under "
                f"{indexed.get(passage_id)!r}"
            )
    for passage_id, archive_id in indexed.items():
        if stored.get(passage_id) != archive_id:
            there = _ARCHIVE_PASSAGES + f"{archive_id}/{passage_id}".encode()
            if not _get(store, there)[0]:
                continue
            problems.append(
                f"the passage index names {passage_id} in archive {archive_id}, which does not "
                "hold it"
            )
    return problems
