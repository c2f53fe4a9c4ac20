"""Filters compose with paging, through letta-client: for each list filter Kelpie honours,
walking the pages one item at a time (the SDK follows the ``after`` cursor) yields exactly the
filtered listing read in one page, and the filter selects something, but not everything. A
filter applied to a page after it was cut (the page comes back short or empty, and the SDK
stops) or a cursor that forgets the filter fails here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_agent.agent._identities import link_key
from kelpie_dst.shims import LlmTiming

from .harness import BASE, api
from .test_letta_client import GUARDS, SOURCE
from .test_letta_client_filters import IDENTITY
from .test_letta_client_runs import ECHO

letta_client._base_client.get_platform()


async def _ids(items: AsyncIterator[Any]) -> list[str]:
    return [item.id async for item in items]


async def scenario() -> list[str]:
    seen: list[str] = []
    async with api(policy=ECHO, timing=LlmTiming()) as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )
        team = await client.blocks.create(label="team", value="Blue Team", description="Crew")
        await client.blocks.create(label="notes", value="nothing", description="misc")
        await client.blocks.create(label="team_b", value="Red Team", description="crew too")
        agents = []
        for i, name in enumerate(["ann", "bob", "cat", "dan", "eve", "fay"]):
            tags = ["odd"] if i % 2 else ["even"]
            block_ids = [team.id] if i < 3 else []
            agents.append(await client.agents.create(name=name, tags=tags, block_ids=block_ids))
        for agent in agents[1::2]:  # identity links for bob, dan, fay
            async with a.service.kv.transaction() as txn:
                await txn.set(link_key(IDENTITY, agent.id), b"")
        for agent in agents[:4]:
            await client.agents.messages.create(
                agent.id, input="hi", max_steps=1 if agent.name in ("bob", "dan") else None
            )
        await client.tools.create(source_code=SOURCE)

        lists: list[tuple[str, Callable[..., Any], dict[str, Any]]] = [
            ("agents identity_id", client.agents.list, {"identity_id": IDENTITY}),
            ("agents last_stop_reason", client.agents.list, {"last_stop_reason": "end_turn"}),
            ("agents query_text", client.agents.list, {"query_text": "A"}),
            ("agents tags", client.agents.list, {"tags": ["odd"]}),
            ("agents asc", client.agents.list, {"tags": ["even"], "order": "asc"}),
            ("tools tool_types", client.tools.list, {"tool_types": ["letta_core"]}),
            ("tools names", client.tools.list, {"names": ["shout", "send_message"]}),
            ("tools search", client.tools.list, {"search": "SEND"}),
            ("blocks label_search", client.blocks.list, {"label_search": "TEAM"}),
            ("blocks connected", client.blocks.list, {"connected_to_agents_count_gt": 0}),
        ]
        for what, list_fn, filters in lists:
            everything = await _ids(list_fn(limit=100))
            whole = await _ids(list_fn(limit=100, **filters))
            paged = await _ids(list_fn(limit=1, **filters))
            assert paged == whole, f"{what}: paged {paged} != one page {whole}"
            assert whole and set(whole) < set(everything), f"{what} selects {whole}"
            seen += [what, *whole]
        await http.aclose()
    for item in seen:
        kelpie_dst.log("api.answer", body=item)
    return seen


@pytest.mark.dst(seeds=1, **GUARDS)
async def test_filters_compose_with_paging() -> None:
    await scenario()  # here a failed assertion fails the test (the check below only compares)


def test_filters_compose_with_paging_deterministically() -> None:
    kelpie_dst.assert_deterministic(scenario, seeds=(1,), runs=2, **GUARDS)
