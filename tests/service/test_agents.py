"""Agents through the service (one node in the simulator, strict guards): create, get, list
with Letta's pagination and filters, update, delete, and each of their errors."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.actors import ActorId
from kelpie_agent.agent import (
    BlockCreate,
    CreateAgent,
    GetAgent,
    Keys,
    ToolRule,
    builtin_id,
    default_tool_names,
)
from kelpie_agent.service import (
    AgentService,
    InvalidError,
    NotFoundError,
    ServiceError,
)

from .harness import OPTIONS, otto, service_node, user

ADD = (
    "def add(a: int, b: int) -> int:\n"
    '    """Add two numbers.\n\n    Args:\n        a: one\n        b: two\n    """\n'
    "    return a + b\n"
)


async def _fails(call: Any, cls: type[ServiceError], status: int, *needles: str) -> ServiceError:
    with pytest.raises(cls) as caught:
        await call
    error = caught.value
    assert error.status == status, error
    assert "\n" not in error.detail
    for needle in needles:
        assert needle in error.detail, (needle, error.detail)
    return error


@pytest.mark.dst(seeds=3, guards="strict")
async def test_create_get_update_delete_an_agent() -> None:
    """The full life of an agent: created with new and existing blocks, base tools, a tool by
    name; read back (the stored view equals the actor's own); updated, including its tool and
    block sets; deleted (its standalone block stays)."""
    async with service_node() as svc:
        shared = await svc.create_block("notes", "shared notes")
        tool = await svc.create_tool(ADD)
        view = await svc.create_agent(
            otto(block_ids=(shared.id,), tags=("a", "b"), metadata={"k": 1}), tools=("add",)
        )
        agent_id = view.agent.id
        assert agent_id.startswith("agent-") and view.agent.name == "otto"
        assert [b.label for b in view.blocks] == ["persona", "human", "notes"]
        base = [builtin_id(n) for n in default_tool_names("memgpt_agent")]
        assert view.agent.tool_ids == (*base, tool.id)
        actor_view = await svc.dispatcher.request(ActorId("agent", agent_id), GetAgent())
        assert await svc.get_agent(agent_id) == actor_view == view
        unnamed = await svc.create_agent(CreateAgent(name=""), include_base_tools=False)
        assert unnamed.agent.name == unnamed.agent.id and unnamed.agent.tool_ids == ()

        updated = await svc.update_agent(
            agent_id,
            {"name": "otto2", "tags": ["c"], "system": "Be brief.", "tool_ids": [tool.id]},
        )
        assert (updated.agent.name, updated.agent.tags) == ("otto2", ("c",))
        assert updated.agent.system == "Be brief." and updated.agent.tool_ids == (tool.id,)
        rules = (ToolRule("add", "exit_loop"),)
        updated = await svc.update_agent(agent_id, {"block_ids": [shared.id], "tool_rules": rules})
        assert [b.label for b in updated.blocks] == ["notes"] and updated.agent.tool_rules == rules
        assert [v.agent.name for v in await svc.list_agents(name="otto2")] == ["otto2"]

        await svc.delete_agent(agent_id)
        await _fails(svc.get_agent(agent_id), NotFoundError, 404, agent_id)
        assert agent_id not in [v.agent.id for v in await svc.list_agents()]
        assert (await svc.get_block(shared.id)).value == "shared notes"
        await _fails(svc.delete_agent(agent_id), NotFoundError, 404, agent_id)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_create_agent_errors_name_the_field_or_the_id() -> None:
    async with service_node() as svc:
        bad: list[tuple[Any, type[ServiceError], int, str]] = [
            (
                otto(memory_blocks=(BlockCreate("no spaces"),)),
                InvalidError,
                422,
                "memory_blocks[0].label",
            ),
            (
                otto(memory_blocks=(BlockCreate("h", "x" * 11, limit=10),)),
                InvalidError,
                400,
                "memory_blocks[0].value: has 11 characters, over the block's limit 10",
            ),
            (
                otto(memory_blocks=(BlockCreate("h"), BlockCreate("h"))),
                InvalidError,
                400,
                "memory_blocks[1].label: 'h' appears twice",
            ),
            (
                otto(memory_blocks=(BlockCreate("h", limit=0),)),
                InvalidError,
                422,
                "memory_blocks[0].limit",
            ),
            (otto(agent_type="gpt_agent"), InvalidError, 422, "agent_type: must be one of"),
            (otto(context_window=10), InvalidError, 422, "context_window"),
            (otto(tags=("ok", 3)), InvalidError, 422, "tags[1]"),
            (
                otto(tool_ids=("tool-missing",)),
                InvalidError,
                400,
                "tool_ids[0]: tool 'tool-missing' not found",
            ),
            (
                otto(block_ids=("block-missing",)),
                InvalidError,
                400,
                "block_ids[0]: block 'block-missing' not found",
            ),
            (otto(tool_ids=("bad id!",)), InvalidError, 422, "tool_ids[0]: not a valid id"),
            ("not a request", InvalidError, 422, "request: must be a CreateAgent"),
        ]
        for request, cls, status, needle in bad:
            await _fails(svc.create_agent(request), cls, status, needle)
        await _fails(svc.create_agent(otto(), tools=("nope",)), InvalidError, 400, "'nope'")
        # Refused by the agent core (400): a react agent has no memory tools.
        react = CreateAgent(
            name="r", agent_type="react_agent", tool_ids=(builtin_id("core_memory_append"),)
        )
        await _fails(svc.create_agent(react, include_base_tools=False), InvalidError, 400, "react")
        assert await svc.list_agents() == []  # nothing half-created


@pytest.mark.dst(seeds=2, guards="strict")
async def test_get_update_delete_errors() -> None:
    async with service_node() as svc:
        view = await svc.create_agent(otto())
        agent_id = view.agent.id
        for call in (svc.get_agent, svc.delete_agent, lambda a: svc.update_agent(a, {})):
            await _fails(call("agent-nope"), NotFoundError, 404, "agent 'agent-nope' not found")
            await _fails(call("../etc"), InvalidError, 422, "agent_id: not a valid id")
        await _fails(svc.update_agent(agent_id, {"colour": 1}), InvalidError, 422, "colour")
        await _fails(svc.update_agent(agent_id, {"name": ""}), InvalidError, 422, "name")
        await _fails(svc.update_agent(agent_id, {"max_tokens": 0}), InvalidError, 422, "max_tokens")
        await _fails(
            svc.update_agent(agent_id, {"tool_ids": ["tool-x"]}),
            InvalidError,
            400,
            "tool_ids[0]: tool 'tool-x'",
        )
        await _fails(svc.update_agent(agent_id, "name"), InvalidError, 422, "changes")  # type: ignore[arg-type]
        assert await svc.get_agent(agent_id) == view  # unchanged by the failed updates


async def _make(svc: AgentService, n: int) -> list[str]:
    ids = []
    for i in range(n):
        tags = ("even",) if i % 2 == 0 else ("odd",)
        view = await svc.create_agent(
            otto(name=f"agent-{i}", tags=(*tags, "all") if i < 4 else tags),
            include_base_tools=False,
        )
        ids.append(view.agent.id)
        await trio.sleep(0.25)
    return ids


async def _walk(svc: AgentService, **query: Any) -> list[str]:
    """Page through like letta-client: ``after=<last id>`` until an empty page."""
    seen: list[str] = []
    page = await svc.list_agents(limit=2, **query)
    while page:
        seen += [v.agent.id for v in page]
        page = await svc.list_agents(limit=2, after=page[-1].agent.id, **query)
    return seen


@pytest.mark.dst(seeds=3, guards="strict")
async def test_list_agents_pages_and_filters_like_letta_without_activating_actors() -> None:
    async with service_node() as svc:
        ids = await _make(svc, 7)
        newest_first = ids[::-1]
        with trio.fail_after(OPTIONS.idle_timeout * 3):
            while svc.dispatcher.active():
                await trio.sleep(0.5)  # every agent deactivated while idle
        assert [v.agent.id for v in await svc.list_agents()] == newest_first
        assert svc.dispatcher.active() == ()  # listing read the index, activated nothing
        assert await _walk(svc) == newest_first
        assert await _walk(svc, order="asc") == ids
        # before=<first id> walks back towards the start, nearest the cursor first
        page = await svc.list_agents(before=ids[3], limit=2, order="asc")
        assert [v.agent.id for v in page] == ids[1:3]
        page = await svc.list_agents(before=ids[3], limit=2)
        assert [v.agent.id for v in page] == [ids[5], ids[4]]
        page = await svc.list_agents(after=ids[5], before=ids[1])
        assert [v.agent.id for v in page] == [ids[4], ids[3], ids[2]]
        assert [v.agent.name for v in await svc.list_agents(name="agent-3")] == ["agent-3"]
        assert await svc.list_agents(name="agent-3x") == []
        found = await svc.list_agents(query_text="AGENT-", order="asc")
        assert [v.agent.id for v in found] == ids
        assert await _walk(svc, tags=["odd"], order="asc") == ids[1::2]
        assert await _walk(svc, tags=["odd", "all"], order="asc") == [*ids[:4], *ids[5::2]]
        both = await svc.list_agents(tags=["odd", "all"], match_all_tags=True, order="asc")
        assert [v.agent.id for v in both] == [ids[1], ids[3]]
        assert await svc.list_agents(limit=0) == []
        assert svc.dispatcher.active() == ()

        await _fails(svc.list_agents(limit=1001), InvalidError, 422, "limit: must be at most 1000")
        await _fails(svc.list_agents(limit=-1), InvalidError, 422, "limit")
        await _fails(svc.list_agents(order="up"), InvalidError, 422, "order")
        await _fails(svc.list_agents(tags="odd"), InvalidError, 422, "tags")
        await _fails(
            svc.list_agents(after="agent-gone"), NotFoundError, 404, "after: agent 'agent-gone'"
        )
        await _fails(svc.list_agents(before="bad id"), InvalidError, 422, "before: not a valid id")


@pytest.mark.dst(seeds=2, guards="strict")
async def test_the_index_follows_creates_updates_deletes_and_repair_rebuilds_it() -> None:
    """The index is written in the agents' own transactions, so ``repair`` has nothing to fix;
    entries lost or left over (data written without the service) are fixed by it, and the
    records of an agent deleted half-way are swept."""
    sim = kelpie_dst.current_simulation()
    assert sim is not None
    async with service_node() as svc:
        ids = await _make(svc, 4)
        await svc.update_agent(ids[0], {"name": "renamed", "tags": ["new"]})
        await svc.send_message(ids[1], user("hello"))
        await svc.delete_agent(ids[2])
        report = await svc.repair()
        assert (report.agents, report.entries_added, report.entries_removed) == (3, 0, 0)
        assert report.orphans_swept == 0
        assert [v.agent.id for v in await svc.list_agents(tags=["new"])] == [ids[0]]

        kv = svc.kv
        entries = await kv.scan_prefix(b"svc/agents/")
        await kv.delete(entries[0][0])  # an agent the index does not know
        await kv.set(b"svc/agents/0000000000000001/agent-ghost", entries[1][1])
        await kv.set(Keys("agent-ghost").message(1), b"left over")  # a half-deleted agent
        assert len(await svc.list_agents()) == 3  # the lost one missing, the ghost skipped
        report = await svc.repair()
        assert (report.entries_added, report.entries_removed, report.orphans_swept) == (1, 1, 1)
        assert [v.agent.id for v in await svc.list_agents(order="asc")] == [ids[0], ids[1], ids[3]]
        assert await kv.scan_prefix(Keys("agent-ghost").messages) == []
        gone = Keys(ids[2])  # the delete cleaned up the otid records, runs and their index
        assert await kv.scan_prefix(gone.otids) == [] == await kv.scan_prefix(gone.runs)
        report = await svc.repair()
        assert (report.entries_added, report.entries_removed, report.orphans_swept) == (0, 0, 0)


@pytest.mark.dst(seeds=3, guards="strict")
async def test_concurrent_approval_changes_all_land() -> None:
    """Marking two tools for approval at the same moment keeps both rules: the read-modify-
    write of the rules runs on the agent's actor, not in the caller (a lost update would drop
    one). Unknown tools are refused; unmarking removes only that tool's rule."""
    async with service_node() as svc:
        await svc.create_tool(ADD)
        mul = ADD.replace("def add", "def mul").replace("a + b", "a * b")
        await svc.create_tool(mul)
        view = await svc.create_agent(otto(), tools=("add", "mul"))
        agent_id = view.agent.id
        async with trio.open_nursery() as nursery:
            for name in ("add", "mul", "send_message"):
                nursery.start_soon(svc.set_tool_approval, agent_id, name, True)
        rules = (await svc.get_agent(agent_id)).agent.tool_rules
        assert sorted(r.tool_name for r in rules if r.type == "requires_approval") == [
            "add",
            "mul",
            "send_message",
        ]
        await _fails(svc.set_tool_approval(agent_id, "nope", True), NotFoundError, 404, "nope")
        after = await svc.set_tool_approval(agent_id, "mul", False)
        assert sorted(r.tool_name for r in after.agent.tool_rules) == ["add", "send_message"]
        again = await svc.set_tool_approval(agent_id, "add", True)  # already marked: unchanged
        assert sorted(r.tool_name for r in again.agent.tool_rules) == ["add", "send_message"]


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_delete_whose_storage_fails_half_way_is_finished_by_its_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Storage gives up after the agent record is deleted, before its history and runs are:
    the service retries, the agent is "not found", and the service answers the delete as
    done. The retry must finish the deletion first, or the acknowledged delete leaves the
    agent's messages and runs readable (found by the agent_lifecycle scenario)."""
    from kelpie_agent.agent import _handlers
    from kelpie_agent.agent._errors import AgentStorageError

    real = _handlers._delete_prefixes
    failed: list[bool] = []

    async def flaky(rt: Any, **kwargs: Any) -> None:
        if not failed:
            failed.append(True)
            raise AgentStorageError("storage gave up (the test)")
        await real(rt, **kwargs)

    async with service_node() as svc:
        view = await svc.create_agent(otto())
        agent_id = view.agent.id
        result = await svc.send_message(agent_id, user("hello"))
        monkeypatch.setattr(_handlers, "_delete_prefixes", flaky)
        await svc.delete_agent(agent_id)
        assert failed
        keys = Keys(agent_id)
        assert await svc.kv.scan_prefix(keys.messages) == []
        assert await svc.kv.scan_prefix(keys.runs) == []
        with pytest.raises(NotFoundError):
            await svc.get_run(result.run_id)
        assert [m for m in await svc.all_messages() if m.id in view.message_ids] == []


@pytest.mark.dst(seeds=2, guards="strict")
async def test_repair_keeps_the_records_of_live_conversations() -> None:
    """A conversation keeps its history, message ids and otid records under its own id, as an
    agent does: ``repair`` (which ``kelpie serve`` runs at every start) must not sweep them as
    the leftovers of a deleted agent; those of a deleted agent's conversation it does sweep."""
    async with service_node() as svc:
        view = await svc.create_agent(otto())
        agent_id = view.agent.id
        conv = await svc.create_conversation(agent_id)
        await svc.send_message(agent_id, user("hello"), conversation_id=conv.id)
        shown = [m.id for m in await svc.list_messages(agent_id, conversation_id=conv.id)]
        keys = Keys(conv.id)
        stored = {p: await svc.kv.scan_prefix(p) for p in (keys.messages, keys.otids)}
        assert shown and all(stored.values())
        report = await svc.repair()
        assert report.orphans_swept == 0
        for prefix, rows in stored.items():
            assert await svc.kv.scan_prefix(prefix) == rows, prefix
        again = await svc.list_messages(agent_id, conversation_id=conv.id)
        assert [m.id for m in again] == shown
        await svc.kv.delete(Keys(agent_id).agent)  # the agent deleted half-way
        report = await svc.repair()
        assert report.orphans_swept >= 1
        assert await svc.kv.scan_prefix(keys.messages) == []
