"""Tools over HTTP: create from source (schema derived), upsert, update, list, delete, and an
agent's tools (attach, detach, run)."""

from __future__ import annotations

import pytest

from .harness import AGENT, STRICT, api

SOURCE = '''def roll(sides: int, times: int = 1) -> str:
    """Roll dice.

    Args:
        sides: faces on each die
        times: how many dice
    """
    return f"{sides}x{times}"
'''


@pytest.mark.dst(seeds=2, **STRICT)
async def test_tool_registry_round_trip() -> None:
    async with api() as a:
        c = a.client
        created = await c.post("/v1/tools/", json={"source_code": SOURCE, "tags": ["dice"]})
        assert created.status_code == 200, created.text
        tool = created.json()
        assert tool["name"] == "roll" and tool["tool_type"] == "custom"
        assert tool["description"] == "Roll dice."
        params = tool["json_schema"]["parameters"]
        assert params["required"] == ["sides"]
        assert params["properties"]["sides"] == {
            "type": "integer",
            "description": "faces on each die",
        }
        assert tool["tags"] == ["dice"] and tool["metadata_"] == {}
        assert (await c.get(f"/v1/tools/{tool['id']}")).json() == tool
        again = await c.post("/v1/tools/", json={"source_code": SOURCE})
        assert again.status_code == 409 and "roll" in again.json()["detail"]
        upserted = await c.put("/v1/tools/", json={"source_code": SOURCE, "description": "New."})
        assert upserted.json()["id"] == tool["id"] and upserted.json()["description"] == "New."
        patched = await c.patch(f"/v1/tools/{tool['id']}", json={"tags": ["x"]})
        assert patched.json()["tags"] == ["x"]
        listed = (await c.get("/v1/tools/", params={"limit": 1000})).json()
        assert listed[-1]["id"] == tool["id"] and listed[0]["tool_type"].startswith("letta")
        paged: list[str] = []
        params_ = {"limit": 7}
        for _ in range(20):
            page = (await c.get("/v1/tools/", params=params_)).json()
            if not page:
                break
            paged += [t["id"] for t in page]
            params_["after"] = page[-1]["id"]  # type: ignore[assignment]
        assert paged == [t["id"] for t in listed]
        named = (await c.get("/v1/tools/", params={"name": "roll"})).json()
        assert [t["id"] for t in named] == [tool["id"]]
        builtin = listed[0]["id"]
        assert (await c.delete(f"/v1/tools/{builtin}")).status_code == 400
        # A missing field is a 422 (the schema says so); source that defines no tool, a 400.
        for body, status in (
            ({}, 422),
            ({"source_code": "x = 1"}, 400),
            ({"source_code": "def f(:\n  pass"}, 400),
        ):
            response = await c.post("/v1/tools/", json=body)
            assert response.status_code == status, (body, response.text)
            assert "source_code" in response.json()["detail"]
        assert (await c.delete(f"/v1/tools/{tool['id']}")).status_code == 200
        assert (await c.get(f"/v1/tools/{tool['id']}")).status_code == 404


@pytest.mark.dst(seeds=2, **STRICT)
async def test_agent_tools_attach_detach_and_run() -> None:
    async with api() as a:
        c = a.client
        tool = (await c.post("/v1/tools/", json={"source_code": SOURCE})).json()
        agent = (await c.post("/v1/agents/", json=AGENT)).json()
        base = f"/v1/agents/{agent['id']}/tools"
        before = [t["name"] for t in (await c.get(base)).json()]
        attached = await c.patch(
            f"{base}/attach/{tool['id']}", headers={"content-type": "application/json"}
        )
        assert attached.status_code == 200
        assert [t["name"] for t in attached.json()["tools"]] == [*before, "roll"]
        names = [t["name"] for t in (await c.get(base)).json()]
        assert names == [*before, "roll"]
        page = (await c.get(base, params={"limit": 2, "order": "desc"})).json()
        assert [t["name"] for t in page] == names[::-1][:2]
        ran = await c.post(f"{base}/roll/run", json={"args": {"sides": 6, "times": 2}})
        assert ran.status_code == 200, ran.text
        assert ran.json()["status"] == "success" and "6x2" in ran.json()["func_return"]
        wrong = await c.post(f"{base}/roll/run", json={"args": {"sides": "six"}})
        assert wrong.status_code == 400 and "args" in wrong.json()["detail"]  # not the tool's
        unknown = await c.post(f"{base}/nope/run", json={"args": {}})
        assert unknown.status_code == 404
        detached = await c.patch(f"{base}/detach/{tool['id']}")
        assert [t["name"] for t in detached.json()["tools"]] == before
        assert (await c.patch(f"{base}/attach/tool-nope")).status_code == 404


@pytest.mark.dst(seeds=2, **STRICT)
async def test_patching_metadata_and_source_keeps_what_was_not_sent() -> None:
    async with api() as a:
        c = a.client
        body = {"source_code": SOURCE, "tags": ["dice"], "return_char_limit": 99}
        tool = (await c.post("/v1/tools/", json=body)).json()
        patched = await c.patch(f"/v1/tools/{tool['id']}", json={"metadata_": {"k": "v"}})
        assert patched.status_code == 200, patched.text
        assert patched.json()["metadata_"] == {"k": "v"}
        source = SOURCE.replace('f"{sides}x{times}"', 'f"{times}x{sides}"')
        rewritten = (await c.patch(f"/v1/tools/{tool['id']}", json={"source_code": source})).json()
        assert rewritten["source_code"] == source
        assert (rewritten["tags"], rewritten["return_char_limit"]) == (["dice"], 99)
        assert rewritten["metadata_"] == {"k": "v"}
