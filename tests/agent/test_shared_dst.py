"""Archives (archival memory shared between agents) and identities, in the agent core."""

from __future__ import annotations

import pytest

from kelpie_agent.agent import (
    AgentStorageError,
    ArchiveStore,
    AttachShared,
    DeletePassage,
    DetachShared,
    GetAgent,
    IdentityStore,
    InsertPassage,
    InvalidRequestError,
    ListPassages,
    ResourceNotFoundError,
    SearchPassages,
)
from kelpie_agent.embeddings import HashingEmbedder
from kelpie_dst.shims import ScriptedPolicy, sim_ports

from .harness import create_agent, make_env, node_kv


@pytest.mark.dst(seeds=2, guards="strict")
async def test_agents_attached_to_an_archive_share_its_passages() -> None:
    kv = node_kv()
    store = ArchiveStore(kv, sim_ports())
    archive = await store.create("team", description="shared notes")
    env = make_env(ScriptedPolicy())
    a, _ = await create_agent(env, kv)
    b, view_b = await create_agent(env, kv)
    await a.handle(InsertPassage("a private thought about kelp"))
    for actor in (a, b):
        await actor.handle(AttachShared("archive", archive.id))
    [shared] = await a.handle(InsertPassage("the otters meet at dawn", ("plan",)))
    assert shared.archive_id == archive.id  # inserts go to the attached archive
    embedder = HashingEmbedder()
    [direct] = await store.add_passages(
        archive.id, [("tide tables for tuesday", (), {}, None)], embedder, embedder.name
    )
    hits = await b.handle(SearchPassages("when do the otters meet", top_k=3))
    texts = [h.passage.text for h in hits]
    assert "the otters meet at dawn" in texts and "a private thought about kelp" not in texts
    listed = [p.text for p in await b.handle(ListPassages())]
    assert set(listed) == {"the otters meet at dawn", "tide tables for tuesday"}
    assert sorted(await store.agents(archive.id)) == sorted([view_b.agent.id, a.rt.agent_id])
    await b.handle(DeletePassage(direct.id))
    assert [p.text for p in await a.handle(ListPassages())] == [
        "a private thought about kelp",
        "the otters meet at dawn",
    ]
    await b.handle(DetachShared("archive", archive.id))
    await b.handle(DetachShared("archive", archive.id))  # a no-op, as in Letta
    assert await b.handle(ListPassages()) == []
    assert await store.agents(archive.id) == [a.rt.agent_id]
    with pytest.raises(ResourceNotFoundError):
        await b.handle(AttachShared("archive", "archive-missing"))


@pytest.mark.dst(seeds=2, guards="strict")
async def test_identities_attach_to_agents() -> None:
    kv = node_kv()
    store = IdentityStore(kv, sim_ports())
    ada = await store.create("ada@example.com", "Ada", identity_type="user")
    with pytest.raises(InvalidRequestError, match="already exists"):
        await store.create("ada@example.com", "Ada again")
    actor, view = await create_agent(make_env(ScriptedPolicy()), kv)
    await actor.handle(AttachShared("identity", ada.id))
    assert (await actor.handle(GetAgent())).agent.identity_ids == (ada.id,)
    assert await store.agents(ada.id) == [view.agent.id]
    await actor.handle(DetachShared("identity", ada.id))
    assert (await actor.handle(GetAgent())).agent.identity_ids == ()
    assert await store.agents(ada.id) == []
    renamed = await store.update(ada.id, name="Ada L.")
    assert renamed.name == "Ada L." and (await store.by_key("ada@example.com")) == renamed
    await store.delete(ada.id)
    with pytest.raises(ResourceNotFoundError):
        await store.get(ada.id)


@pytest.mark.dst(seeds=3, guards="strict", faults=["storage.commit_unknown=0.5"])
async def test_an_identity_whose_commit_outcome_is_unknown_is_created_not_refused() -> None:
    """The create's retry after an ambiguous commit found its own key taken and answered
    "already exists" for an identity it had created (a real bug found by schedJ, session 14)."""
    store = IdentityStore(node_kv(), sim_ports())
    made = []
    for n in range(8):
        try:
            record = await store.create(f"user-{n}@example.com", f"User {n}")
        except AgentStorageError:
            continue
        assert record.identifier_key == f"user-{n}@example.com"
        assert await store.by_key(record.identifier_key) == record
        made.append(record)
    assert made
    listed = await store.all()
    assert {r.id for r in made} <= {r.id for r in listed}
    keys = [r.identifier_key for r in listed]
    assert len(keys) == len(set(keys))


@pytest.mark.dst(seeds=3, guards="strict", faults=["storage.commit_unknown=0.5"])
async def test_an_archive_passage_delete_whose_commit_outcome_is_unknown_is_not_a_404() -> None:
    """The delete's retry after an ambiguous commit found its passage gone and answered "not
    found" for a passage it had deleted (a real bug found by schedJ, session 14)."""
    store = ArchiveStore(node_kv(), sim_ports())
    embedder = HashingEmbedder()
    archive = None
    while archive is None:
        try:
            archive = await store.create("shelf")
        except AgentStorageError:
            continue
    stored = []
    for n in range(6):
        try:
            [record] = await store.add_passages(
                archive.id, [(f"kelp note {n}", (), {}, None)], embedder, "hashing"
            )
        except AgentStorageError:
            continue
        stored.append(record)
    assert stored
    for record in stored:
        try:
            await store.delete_passage(archive.id, record.id)
        except AgentStorageError:
            continue
