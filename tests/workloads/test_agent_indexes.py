"""The store's indexes agree with their records (``_agent_indexes.index_problems``): a store
written as kelpie_agent writes it passes; each planted disagreement is named."""

from __future__ import annotations

from kelpie_agent.agent import AgentRecord, Keys
from kelpie_agent.agent._archives import archive_passage_writes
from kelpie_agent.agent._codec import pack
from kelpie_agent.agent._identities import IdentityRecord, identity_key, key_key
from kelpie_agent.agent._models import PassageRecord
from kelpie_agent.service._records import encode, index_entry
from kelpie_dst.shims._storage import SimKVStore
from kelpie_dst.workloads._agent_indexes import index_problems

AGENT = AgentRecord(id="agent-1", name="otter", tags=("red",), created_at=1_700_000_000.25)
IDENTITY = IdentityRecord(id="identity-1", identifier_key="user-7", name="Ann")
PASSAGE = PassageRecord(
    id="passage-1", seq=0, text="kelp", vector=b"", embedder="hash", archive_id="archive-1"
)


def _store() -> SimKVStore:
    store = SimKVStore()
    entry = index_entry(AGENT)
    store._apply(
        [
            (Keys(AGENT.id).agent, pack(AGENT)),
            (entry.key, encode(entry)),
            (identity_key(IDENTITY.id), pack(IDENTITY)),
            (key_key(IDENTITY.identifier_key), pack(IDENTITY.id)),
            *archive_passage_writes(PASSAGE),
        ]
    )
    return store


def test_a_consistent_store_passes() -> None:
    assert index_problems(_store()) == []


def test_a_deleted_agent_still_indexed() -> None:
    store = _store()
    store._apply([(Keys(AGENT.id).agent, None)])
    [problem] = index_problems(store)
    assert "agent-1" in problem and "no agent record" in problem


def test_an_index_entry_with_an_old_name() -> None:
    store = _store()
    renamed = AgentRecord(id=AGENT.id, name="seal", tags=("red",), created_at=AGENT.created_at)
    store._apply([(Keys(AGENT.id).agent, pack(renamed))])
    [problem] = index_problems(store)
    assert "'otter'" in problem and "'seal'" in problem


def test_an_agent_without_an_entry() -> None:
    store = _store()
    store._apply([(index_entry(AGENT).key, None)])
    [problem] = index_problems(store)
    assert "no entry in the agent index" in problem


def test_an_identity_key_left_behind_by_a_change() -> None:
    store = _store()
    moved = IdentityRecord(id=IDENTITY.id, identifier_key="user-8", name="Ann")
    store._apply([(identity_key(IDENTITY.id), pack(moved)), (key_key("user-8"), pack(moved.id))])
    [problem] = index_problems(store)
    assert "'user-7' still names identity-1" in problem


def test_an_archive_passage_without_its_id_index() -> None:
    store = _store()
    store._apply([(b"apassageid/passage-1", None)])
    [problem] = index_problems(store)
    assert "passage-1" in problem


def test_a_passage_id_index_left_by_a_delete() -> None:
    store = _store()
    store._apply([(b"apassage/archive-1/passage-1", None)])
    [problem] = index_problems(store)
    assert "does not hold it" in problem


def test_an_unreadable_record_is_not_judged() -> None:
    store = _store()
    store.corrupt(Keys(AGENT.id).agent)
    assert index_problems(store) == []
