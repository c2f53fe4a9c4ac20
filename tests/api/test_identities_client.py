"""``agents.identities.attach``/``detach`` through the real letta-client (strict validation):
the link takes effect in ``agents.list(identity_id=...)``, a missing identity is a 404,
detaching twice changes nothing. Same seed, same trace hash."""

from __future__ import annotations

import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.agent import IdentityStore

from .harness import BASE, STRICT, api

GUARDS = {**STRICT, "guard_allow": (*STRICT["guard_allow"], "letta_client", "anyio")}


async def identities_flow() -> list[str]:
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(base_url=BASE, http_client=http, max_retries=0)
        # letta-client 1.12.1 has no identities resource: made by the core's store
        store = IdentityStore(a.service.kv, a.service.ports)
        ann = await store.create("user-ann", "Ann", identity_type="user")
        ada = await client.agents.create(name="ada")
        bob = await client.agents.create(name="bob")
        assert [x.id async for x in client.agents.list(identity_id=ann.id)] == []
        attached = await client.agents.identities.attach(ann.id, agent_id=ada.id)
        assert attached is not None
        assert [x.id async for x in client.agents.list(identity_id=ann.id)] == [ada.id]
        assert await store.agents(ann.id) == [ada.id]
        await client.agents.identities.attach(ann.id, agent_id=ada.id)  # again: no change
        assert await store.agents(ann.id) == [ada.id]
        with pytest.raises(letta_client.NotFoundError, match="identity-missing"):
            await client.agents.identities.attach("identity-missing", agent_id=bob.id)
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.identities.attach(ann.id, agent_id="agent-missing")
        assert (await client.agents.retrieve(ada.id)).identity_ids == [ann.id]
        await client.agents.identities.detach(ann.id, agent_id=ada.id)
        await client.agents.identities.detach(ann.id, agent_id=ada.id)  # not attached: no-op
        assert [x.id async for x in client.agents.list(identity_id=ann.id)] == []
        assert await store.agents(ann.id) == []
        # agents.create links identities in its own transaction (repeats once)
        cy = await client.agents.create(name="cy", identity_ids=[ann.id, ann.id])
        assert cy.identity_ids == [ann.id]
        assert [x.id async for x in client.agents.list(identity_id=ann.id)] == [cy.id]
        assert await store.agents(ann.id) == [cy.id]
        assert (await client.agents.retrieve(cy.id)).identity_ids == [ann.id]
        await http.aclose()
    seen = f"{ann.id} {ada.id} {bob.id}"
    kelpie_dst.log("api.answer", body=seen)
    return [seen]


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_identities_attach_and_detach_through_letta_client() -> None:
    await identities_flow()


def test_identities_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(identities_flow, seeds=(1,), runs=2, **GUARDS)
