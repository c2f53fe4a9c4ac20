"""Agents and health over HTTP: shapes, exact paths, pagination, errors, auth."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from .harness import AGENT, STRICT, api


async def _create(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await client.post("/v1/agents/", json={**AGENT, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.dst(seeds=2, **STRICT)
async def test_create_get_update_delete_in_letta_shapes() -> None:
    async with api() as a:
        c = a.client
        agent = await _create(
            c,
            tags=["blue", "x"],
            metadata={"k": [1, 2.5, None]},
            description="d",
            tool_rules=[{"tool_name": "send_message", "type": "exit_loop"}],
            model="anthropic/claude-haiku-4-5",
            context_window_limit=16000,
        )
        assert agent["id"].startswith("agent-") and agent["name"] == "otto"
        assert agent["agent_type"] == "memgpt_agent"
        assert agent["llm_config"] == {
            "model": "claude-haiku-4-5",
            "model_endpoint_type": "anthropic",
            "context_window": 16000,
            "max_tokens": 4096,
            "handle": "anthropic/claude-haiku-4-5",
        }
        labels = [b["label"] for b in agent["memory"]["blocks"]]
        assert labels == ["persona", "human"] == [b["label"] for b in agent["blocks"]]
        assert agent["blocks"][0]["limit"] == 2000 and agent["blocks"][0]["value"] == "I am Otto."
        names = {t["name"] for t in agent["tools"]}
        assert {"send_message", "core_memory_append", "archival_memory_search"} <= names
        assert all("metadata_" in t and "json_schema" in t for t in agent["tools"])
        assert agent["sources"] == [] and agent["tags"] == ["blue", "x"]
        assert agent["metadata"] == {"k": [1, 2.5, None]}
        assert agent["tool_rules"] == [
            {"tool_name": "send_message", "type": "exit_loop", "prompt_template": None}
        ]
        assert agent["created_at"].startswith("2026-") and agent["last_stop_reason"] is None

        got = await c.get(f"/v1/agents/{agent['id']}")
        assert got.status_code == 200 and got.json() == agent

        refused = await c.patch(
            f"/v1/agents/{agent['id']}", json={"name": "otto2", "tags": ["y"], "unknown": 1}
        )  # an unknown field is refused naming it, and nothing is changed
        assert refused.status_code == 422 and refused.json()["detail"].startswith("body.unknown:")
        assert (await c.get(f"/v1/agents/{agent['id']}")).json() == agent
        patched = await c.patch(f"/v1/agents/{agent['id']}", json={"name": "otto2", "tags": ["y"]})
        assert patched.status_code == 200, patched.text
        assert patched.json()["name"] == "otto2" and patched.json()["tags"] == ["y"]
        assert patched.json()["blocks"] == agent["blocks"]

        deleted = await c.delete(f"/v1/agents/{agent['id']}")
        assert deleted.status_code == 200
        assert deleted.json() == {"message": f"Agent id={agent['id']} successfully deleted"}
        gone = await c.get(f"/v1/agents/{agent['id']}")
        assert gone.status_code == 404 and gone.headers["x-should-retry"] == "false"
        assert gone.json() == {"detail": f"agent {agent['id']!r} not found"}


@pytest.mark.dst(seeds=1, **STRICT)
async def test_base_tools_tool_names_and_defaults() -> None:
    async with api() as a:
        plain = await _create(a.client, agent_type="letta_v1_agent", name=None)
        assert plain["name"] == plain["id"]  # no name: the service names it after its id
        assert {t["name"] for t in plain["tools"]} >= {"memory_replace", "conversation_search"}
        bare = await _create(a.client, include_base_tools=False, tools=["send_message"])
        assert [t["name"] for t in bare["tools"]] == ["send_message"]
        missing = await a.client.post("/v1/agents/", json={**AGENT, "tools": ["nope_tool"]})
        assert missing.status_code == 400 and "nope_tool" in missing.json()["detail"]


@pytest.mark.dst(seeds=1, **STRICT)
async def test_paths_are_exact_and_never_redirect() -> None:
    async with api() as a:
        c = a.client
        for path in ("/v1/health/", "/v1/health", "/v1/agents/", "/v1/agents", "/v1/tools/"):
            response = await c.get(path)
            assert response.status_code == 200, (path, response.status_code)
        health = await c.get("/v1/health/")
        assert health.json() == {"status": "ok", "version": "0.1.0"}
        agent = await _create(c)
        assert (await c.get(f"/v1/agents/{agent['id']}/")).status_code == 404
        assert (await c.get("/v1/nothing")).json() == {"detail": "Not Found"}
        wrong = await c.put(f"/v1/agents/{agent['id']}", json={})
        assert wrong.status_code == 405 and wrong.headers["x-should-retry"] == "false"


@pytest.mark.dst(seeds=2, **STRICT)
async def test_pagination_follows_letta_cursors_and_iteration_ends() -> None:
    async with api() as a:
        c = a.client
        ids = []
        for i in range(7):
            ids.append((await _create(c, name=f"a{i}", tags=[f"t{i % 2}"]))["id"])
            await trio.sleep(0.01)  # creation times differ (equal ones are ordered by id)
        newest_first = [x["id"] for x in (await c.get("/v1/agents/")).json()]
        assert newest_first == ids[::-1]  # default order: desc
        oldest_first = [x["id"] for x in (await c.get("/v1/agents/?order=asc")).json()]
        assert oldest_first == ids
        assert [x["id"] for x in (await c.get("/v1/agents/?ascending=true")).json()] == ids
        for order, expected in (("asc", ids), ("desc", ids[::-1])):
            seen: list[str] = []
            params: dict[str, Any] = {"limit": 3, "order": order}
            for _ in range(10):
                page = (await c.get("/v1/agents/", params=params)).json()
                if not page:
                    break
                seen += [x["id"] for x in page]
                params["after"] = page[-1]["id"]
            assert seen == expected
            # backwards, as the SDK does after a first page with `before`
            back: list[str] = []
            params = {"limit": 2, "order": order, "before": expected[-1]}
            for _ in range(10):
                page = (await c.get("/v1/agents/", params=params)).json()
                if not page:
                    break
                back = [x["id"] for x in page] + back
                params["before"] = page[0]["id"]
            assert back == expected[:-1]
        tagged = (await c.get("/v1/agents/", params={"tags": ["t1"], "order": "asc"})).json()
        assert [x["id"] for x in tagged] == ids[1::2]
        by_name = (await c.get("/v1/agents/", params={"name": "a3"})).json()
        assert [x["id"] for x in by_name] == [ids[3]]
        assert len((await c.get("/v1/agents/", params={"query_text": "A"})).json()) == 7
        bad = await c.get("/v1/agents/", params={"after": "agent-missing"})
        assert bad.status_code == 404 and "after" in bad.json()["detail"]
        for query in ("limit=-1", "limit=1001", "order=sideways", "limit=abc"):
            response = await c.get(f"/v1/agents/?{query}")
            assert response.status_code == 422, query
            assert response.json()["detail"].startswith("query."), response.json()


@pytest.mark.dst(seeds=1, **STRICT)
async def test_invalid_bodies_are_422_naming_the_field_and_semantic_errors_400() -> None:
    async with api() as a:
        c = a.client
        cases: list[tuple[Any, str]] = [
            ({"agent_type": "sleeptime_agent"}, "body.agent_type: Input should be"),
            ({"memory_blocks": [{"value": "x"}]}, "body.memory_blocks[0].label: Field required"),
            ({"memory_blocks": [{"label": "a", "limit": 0}]}, "body.memory_blocks[0].limit"),
            ({"tool_rules": [{"tool_name": "x", "type": "max_count_per_step"}]}, "max_count"),
            (b'{"metadata": {"a": Infinity}}', "body.metadata.a: number must be finite"),
            (b'{"name": "\\ud800"}', "body.name: text contains a lone surrogate"),
            ([1, 2], "body: Input should be a valid dictionary"),
        ]
        for body, expected in cases:
            if isinstance(body, bytes):
                response = await c.post(
                    "/v1/agents/", content=body, headers={"content-type": "application/json"}
                )
            else:
                response = await c.post("/v1/agents/", json=body)
            assert response.status_code == 422, (body, response.text)
            assert expected in response.json()["detail"], (body, response.json())
            assert response.headers["x-should-retry"] == "false"
        broken = await c.post(
            "/v1/agents/", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert broken.status_code == 422 and "JSON" in broken.json()["detail"]
        twice = await c.post(
            "/v1/agents/",
            json={"memory_blocks": [{"label": "a"}, {"label": "a"}]},
        )
        assert twice.status_code == 400 and "memory_blocks[1].label" in twice.json()["detail"]
        bad_label = await c.post("/v1/agents/", json={"memory_blocks": [{"label": "a b"}]})
        assert bad_label.status_code == 422 and "label" in bad_label.json()["detail"]
        bad_id = await c.get("/v1/agents/has space")
        assert bad_id.status_code == 422 and "agent_id" in bad_id.json()["detail"]


@pytest.mark.dst(seeds=1, **STRICT)
async def test_bearer_auth_guards_everything_but_health() -> None:
    async with api(api_key="s3cret") as a:
        c = a.client
        assert (await c.get("/v1/health/")).status_code == 200
        missing = await c.get("/v1/agents/")
        assert missing.status_code == 401 and "Authorization" in missing.json()["detail"]
        assert missing.headers["x-should-retry"] == "false"
        wrong = await c.get("/v1/agents/", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json() == {"detail": "invalid API key"}
        basic = await c.get("/v1/agents/", headers={"Authorization": "Basic czNjcmV0"})
        assert basic.status_code == 401
        ok = await c.get("/v1/agents/", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json() == []
        denied = await c.post("/v1/agents/", json=AGENT)
        assert denied.status_code == 401
        assert (await c.get("/v1/agents/", headers={"Authorization": "Bearer s3cret"})).json() == []
        schema = a.app.openapi()
        assert "HTTPBearer" in schema["components"]["securitySchemes"]
    async with api() as a:
        assert (await a.client.get("/v1/agents/")).status_code == 200
