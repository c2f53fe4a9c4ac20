"""Archival memory and tools through the service (one node, strict guards): each method's
happy path and errors."""

from __future__ import annotations

import pytest
import trio

from kelpie_agent.agent import CreateAgent, builtin_id
from kelpie_agent.service import ConflictError, InvalidError, NotFoundError

from .harness import otto, service_node, user
from .test_agents import ADD, _fails


@pytest.mark.dst(seeds=3, guards="strict")
async def test_passages_insert_list_search_delete() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        texts = ["kelp grows fast", "otters hold hands", "kelp forests shelter otters", "tides"]
        made = []
        for i, text in enumerate(texts):
            [passage] = await svc.insert_passage(agent_id, text, tags=("sea",) if i % 2 else ())
            made.append(passage)
            await trio.sleep(1)
        ids = [p.id for p in made]
        assert [p.id for p in await svc.list_passages(agent_id)] == ids
        assert [p.id for p in await svc.list_passages(agent_id, ascending=False)] == ids[::-1]
        assert [p.id for p in await svc.list_passages(agent_id, after=ids[0], limit=2)] == ids[1:3]
        page = await svc.list_passages(agent_id, after=ids[3], ascending=False, limit=2)
        assert [p.id for p in page] == [ids[2], ids[1]]
        assert [p.id for p in await svc.list_passages(agent_id, before=ids[3], limit=2)] == ids[1:3]
        assert [p.id for p in await svc.list_passages(agent_id, search="KELP")] == [ids[0], ids[2]]
        hits = await svc.search_passages(agent_id, "otters", top_k=2)
        assert len(hits) == 2 and {h.passage.id for h in hits} <= {ids[1], ids[2]}
        assert hits[0].score >= hits[1].score
        tagged = await svc.search_passages(agent_id, "kelp", tags=["sea"], top_k=10)
        assert {h.passage.id for h in tagged} == {ids[1], ids[3]}
        window = await svc.search_passages(
            agent_id, "kelp", start=made[1].created_at, end=made[2].created_at, top_k=10
        )
        assert {h.passage.id for h in window} == {ids[1], ids[2]}
        reply = await svc.send_message(agent_id, user("do you remember kelp forests?"))
        assert "kelp" in reply.reply  # the agent's own archival search finds them
        await svc.delete_passage(agent_id, ids[0])
        assert [p.id for p in await svc.list_passages(agent_id)] == ids[1:]


@pytest.mark.dst(seeds=2, guards="strict")
async def test_passage_errors() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        [passage] = await svc.insert_passage(agent_id, "kept")
        await _fails(svc.insert_passage("agent-nope", "x"), NotFoundError, 404, "agent-nope")
        await _fails(svc.insert_passage(agent_id, " "), InvalidError, 422, "text")
        await _fails(svc.insert_passage(agent_id, "x", tags="t"), InvalidError, 422, "tags")
        await _fails(svc.list_passages(agent_id, after="passage-nope"), NotFoundError, 404)
        await _fails(svc.list_passages(agent_id, limit=-1), InvalidError, 422, "limit")
        await _fails(svc.search_passages(agent_id, ""), InvalidError, 422, "query")
        await _fails(svc.search_passages(agent_id, "q", top_k=-1), InvalidError, 422, "top_k")
        await _fails(
            svc.search_passages(agent_id, "q", tag_match_mode="some"),
            InvalidError,
            422,
            "tag_match_mode",
        )
        await _fails(
            svc.search_passages(agent_id, "q", start=10.0, end=5.0), InvalidError, 400, "end"
        )
        await _fails(
            svc.search_passages(agent_id, "q", start=float("nan")), InvalidError, 422, "start"
        )
        await _fails(
            svc.delete_passage(agent_id, "passage-nope"), NotFoundError, 404, "passage-nope"
        )
        await _fails(svc.delete_passage(agent_id, "x/y"), InvalidError, 422, "passage_id")
        assert [p.id for p in await svc.list_passages(agent_id)] == [passage.id]


@pytest.mark.dst(seeds=3, guards="strict")
async def test_tools_create_list_get_update_upsert_delete() -> None:
    async with service_node() as svc:
        tool = await svc.create_tool(ADD, tags=("math",))
        assert (tool.name, tool.tool_type, tool.tags) == ("add", "custom", ("math",))
        assert tool.json_schema["parameters"]["required"] == ["a", "b"]
        assert await svc.get_tool(tool.id) == tool
        assert (await svc.get_tool(builtin_id("send_message"))).name == "send_message"
        listed = await svc.list_tools(limit=1000)
        assert listed[-1] == tool and len(listed) > 10  # the built-ins, then stored tools
        assert await svc.list_tools(name="add") == [tool]
        assert await svc.list_tools(after=listed[-2].id) == [tool]
        assert await svc.tool_named("add") == tool
        changed = await svc.update_tool(tool.id, description="Adds.", tags=["x"])
        assert (changed.description, changed.tags, changed.id) == ("Adds.", ("x",), tool.id)
        source = ADD.replace("a + b", "a + b + 0")
        rewritten = await svc.update_tool(tool.id, source_code=source)
        assert rewritten.source_code == source and rewritten.id == tool.id
        assert rewritten.tags == ("x",)
        upserted = await svc.upsert_tool(ADD)
        assert upserted.id == tool.id and upserted.source_code == ADD
        other = await svc.upsert_tool("def mul(a: int, b: int) -> int:\n    return a * b\n")
        assert other.id != tool.id
        await svc.delete_tool(other.id)
        await _fails(svc.get_tool(other.id), NotFoundError, 404, other.id)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_tool_errors() -> None:
    async with service_node() as svc:
        tool = await svc.create_tool(ADD)
        await _fails(svc.create_tool(ADD), ConflictError, 409, "a tool named 'add' already exists")
        await _fails(svc.create_tool("x = 1\n"), InvalidError, 400, "source_code")
        await _fails(svc.create_tool(""), InvalidError, 422, "source_code: must not be empty")
        await _fails(
            svc.create_tool(ADD.replace("add", "other"), return_char_limit=0),
            InvalidError,
            422,
            "return_char_limit",
        )
        await _fails(svc.get_tool("tool-nope"), NotFoundError, 404, "tool-nope")
        await _fails(svc.get_tool("a b"), InvalidError, 422, "tool_id")
        await _fails(svc.update_tool(tool.id, name="x"), InvalidError, 422, "name")
        await _fails(svc.update_tool("tool-nope", description="x"), NotFoundError, 404)
        builtin = builtin_id("send_message")
        await _fails(svc.update_tool(builtin, description="x"), InvalidError, 400, "built-in")
        await _fails(svc.delete_tool(builtin), InvalidError, 400, "built-in")
        await _fails(svc.delete_tool("tool-nope"), NotFoundError, 404)
        await _fails(svc.tool_named("nope"), NotFoundError, 404, "'nope'")
        mul = await svc.create_tool("def mul(a: int, b: int) -> int:\n    return a * b\n")
        await _fails(
            svc.update_tool(mul.id, source_code=ADD), ConflictError, 409, "'add' already exists"
        )
        await _fails(svc.list_tools(before="tool-nope"), NotFoundError, 404, "before")
        assert await svc.get_tool(tool.id) == tool


@pytest.mark.dst(seeds=3, guards="strict")
async def test_an_agents_tools_attach_list_run_detach_and_errors() -> None:
    async with service_node() as svc:
        tool = await svc.create_tool(ADD)
        agent_id = (await svc.create_agent(CreateAgent(name="calc"))).agent.id
        view = await svc.attach_tool(agent_id, tool.id)
        assert tool.id in view.agent.tool_ids
        names = [t.name for t in await svc.list_agent_tools(agent_id)]
        assert names[-1] == "add" and "memory_replace" in names
        result = await svc.run_tool(agent_id, "add", {"a": 2, "b": 3})
        assert (result.status, result.func_return) == ("success", "5")
        found = await svc.run_tool(agent_id, "conversation_search", {"query": "x"})
        assert found.status == "success"

        await _fails(svc.run_tool(agent_id, "add", {"a": "two", "b": 3}), InvalidError, 400, "args")
        await _fails(svc.run_tool(agent_id, "nope", {}), NotFoundError, 404, "'nope'")
        await _fails(svc.run_tool(agent_id, "add", "a=1"), InvalidError, 422, "args")  # type: ignore[arg-type]
        await _fails(svc.attach_tool(agent_id, "tool-nope"), NotFoundError, 404, "tool-nope")
        await _fails(svc.attach_tool("agent-nope", tool.id), NotFoundError, 404, "agent-nope")

        view = await svc.detach_tool(agent_id, tool.id)
        assert tool.id not in view.agent.tool_ids
        await _fails(svc.detach_tool(agent_id, tool.id), NotFoundError, 404, "is not attached")
        await _fails(svc.run_tool(agent_id, "add", {"a": 1, "b": 2}), NotFoundError, 404)
        react = await svc.create_agent(CreateAgent(name="r", agent_type="react_agent"))
        await _fails(
            svc.attach_tool(react.agent.id, builtin_id("memory_insert")),
            InvalidError,
            400,
            "react_agent has no memory tools",
        )


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_new_source_keeps_the_fields_the_update_did_not_give() -> None:
    async with service_node() as svc:
        tool = await svc.create_tool(ADD, tags=("math",), return_char_limit=123)
        tagged = await svc.update_tool(tool.id, metadata={"owner": "ada"})
        assert dict(tagged.metadata) == {"owner": "ada"}
        rewritten = await svc.update_tool(tool.id, source_code=ADD.replace("a + b", "b + a"))
        assert (rewritten.tags, rewritten.return_char_limit) == (("math",), 123)
        assert dict(rewritten.metadata) == {"owner": "ada"}
        assert await svc.get_tool(tool.id) == rewritten
        limited = await svc.update_tool(tool.id, source_code=ADD, return_char_limit=7)
        assert (limited.return_char_limit, limited.tags) == (7, ("math",))
        await _fails(svc.update_tool(tool.id, metadata=[1]), InvalidError, 422, "metadata")
