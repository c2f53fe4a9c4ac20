"""Blocks (core memory by label, standalone blocks) and archival memory over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from .harness import AGENT, STRICT, api


async def _agent(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await client.post("/v1/agents/", json={**AGENT, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.dst(seeds=2, **STRICT)
async def test_core_memory_blocks_by_label() -> None:
    async with api() as a:
        c = a.client
        agent = await _agent(c)
        base = f"/v1/agents/{agent['id']}/core-memory/blocks"
        listed = (await c.get(base)).json()
        assert [b["label"] for b in listed] == ["persona", "human"]
        page = (await c.get(base, params={"after": listed[0]["id"]})).json()
        assert [b["label"] for b in page] == ["human"]
        assert (await c.get(base, params={"after": listed[1]["id"]})).json() == []
        persona = (await c.get(f"{base}/persona")).json()
        assert persona["value"] == "I am Otto." and persona["limit"] == 2000
        changed = await c.patch(f"{base}/human", json={"value": "Name: Ada", "description": "d"})
        assert changed.status_code == 200 and changed.json()["value"] == "Name: Ada"
        renamed = await c.patch(f"{base}/human", json={"label": "user"})
        assert renamed.json()["label"] == "user"
        assert (await c.get(f"{base}/human")).status_code == 404
        over = await c.patch(f"{base}/persona", json={"value": "x" * 2001})
        assert over.status_code == 400 and "limit" in over.json()["detail"]
        clash = await c.patch(f"{base}/user", json={"label": "persona"})
        assert clash.status_code == 409 and clash.headers["x-should-retry"] == "false"
        bad = await c.patch(f"{base}/persona", json={"limit": 0})
        assert bad.status_code == 422 and bad.json()["detail"].startswith("body.limit")
        state = (await c.get(f"/v1/agents/{agent['id']}")).json()
        assert {b["label"]: b["value"] for b in state["blocks"]}["user"] == "Name: Ada"


@pytest.mark.dst(seeds=2, **STRICT)
async def test_standalone_blocks_attach_detach_and_list() -> None:
    async with api() as a:
        c = a.client
        created = await c.post("/v1/blocks/", json={"label": "notes", "value": "n", "limit": 50})
        assert created.status_code == 200, created.text
        block = created.json()
        assert block["id"].startswith("block-") and block["limit"] == 50
        assert (await c.get(f"/v1/blocks/{block['id']}")).json() == block
        patched = await c.patch(f"/v1/blocks/{block['id']}", json={"value": "n2"})
        assert patched.json()["value"] == "n2"
        agent = await _agent(c)
        attach = f"/v1/agents/{agent['id']}/core-memory/blocks/attach/{block['id']}"
        state = (await c.patch(attach)).json()
        assert [b["label"] for b in state["blocks"]] == ["persona", "human", "notes"]
        users = (await c.get(f"/v1/blocks/{block['id']}/agents")).json()
        assert [u["id"] for u in users] == [agent["id"]]
        detach = f"/v1/agents/{agent['id']}/core-memory/blocks/detach/{block['id']}"
        assert [b["label"] for b in (await c.patch(detach)).json()["blocks"]] == [
            "persona",
            "human",
        ]
        assert (await c.get(f"/v1/blocks/{block['id']}/agents")).json() == []
        every = [b["id"] for b in (await c.get("/v1/blocks/", params={"limit": 100})).json()]
        assert block["id"] in every and len(every) == 3
        labelled = (await c.get("/v1/blocks/", params={"label": "notes"})).json()
        assert [b["id"] for b in labelled] == [block["id"]]
        deleted = await c.delete(f"/v1/blocks/{block['id']}")
        assert deleted.status_code == 200 and "deleted" in deleted.json()["message"]
        assert (await c.get(f"/v1/blocks/{block['id']}")).status_code == 404
        assert (await c.patch(attach)).status_code == 404
        for body, status in (
            ({"value": "x"}, 422),
            ({"label": "a b"}, 422),
            ({"label": "x", "value": "yy", "limit": 1}, 400),  # over its own limit: semantic
        ):
            response = await c.post("/v1/blocks/", json=body)
            assert response.status_code == status, (body, response.text)


@pytest.mark.dst(seeds=2, **STRICT)
async def test_archival_insert_list_search_delete() -> None:
    async with api() as a:
        c = a.client
        agent = await _agent(c)
        base = f"/v1/agents/{agent['id']}/archival-memory"
        texts = ["otters hold hands", "the cat sleeps", "otters eat clams"]
        ids = []
        for i, text in enumerate(texts):
            inserted = await c.post(base, json={"text": text, "tags": ["animal", f"n{i}"]})
            assert inserted.status_code == 200, inserted.text
            [passage] = inserted.json()
            assert passage["text"] == text and passage["tags"] == ["animal", f"n{i}"]
            ids.append(passage["id"])
            await trio.sleep(1)
        listed = (await c.get(base)).json()
        assert [p["id"] for p in listed] == ids
        assert [p["id"] for p in (await c.get(base, params={"ascending": False})).json()] == (
            ids[::-1]
        )
        assert [p["id"] for p in (await c.get(base, params={"after": ids[0]})).json()] == ids[1:]
        assert [p["text"] for p in (await c.get(base, params={"search": "OTTERS"})).json()] == [
            texts[0],
            texts[2],
        ]
        found = (await c.get(f"{base}/search", params={"query": "otters clams", "top_k": 2})).json()
        assert found["count"] == 2 and found["results"][0]["content"] == "otters eat clams"
        assert set(found["results"][0]) == {"id", "content", "timestamp", "tags"}
        tagged = (
            await c.get(
                f"{base}/search",
                params={"query": "otters", "tags": ["n1", "animal"], "tag_match_mode": "all"},
            )
        ).json()
        assert [r["id"] for r in tagged["results"]] == [ids[1]]
        first = listed[0]["created_at"]
        later = (
            await c.get(f"{base}/search", params={"query": "otters", "start_datetime": first[:19]})
        ).json()
        assert later["count"] == 3
        none = (
            await c.get(
                f"{base}/search",
                params={"query": "otters", "end_datetime": "2000-01-01T00:00:00Z"},
            )
        ).json()
        assert none == {"count": 0, "results": []}
        bad_date = await c.get(f"{base}/search", params={"query": "x", "start_datetime": "soon"})
        assert bad_date.status_code == 422 and "start_datetime" in bad_date.json()["detail"]
        mode = await c.get(f"{base}/search", params={"query": "x", "tag_match_mode": "some"})
        assert mode.status_code == 422
        assert (await c.delete(f"{base}/{ids[1]}")).status_code == 200
        assert [p["id"] for p in (await c.get(base)).json()] == [ids[0], ids[2]]
        assert (await c.delete(f"{base}/passage-nope")).status_code == 404
        assert (await c.post(base, json={"text": ""})).status_code == 422
        assert (await c.get("/v1/agents/agent-nope/archival-memory")).status_code == 404
