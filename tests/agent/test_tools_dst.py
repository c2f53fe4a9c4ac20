"""Built-in tools end to end in the simulator (through RunTool and through the loop), blocks,
the tool registry, and typed errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from kelpie_agent.agent import (
    AgentNotFoundError,
    AttachBlock,
    AttachTool,
    BlockCreate,
    BlockLimitError,
    BlockNotFoundError,
    BlockStore,
    DeleteAgent,
    DeletePassage,
    GetAgent,
    GetBlock,
    InputMessage,
    InsertPassage,
    InvalidRequestError,
    ListMessages,
    ListPassages,
    ListTools,
    NameConflictError,
    RunTool,
    SearchPassages,
    ToolRunResult,
    ToolStore,
    UpdateAgent,
    UpdateBlock,
    builtin_id,
    is_prompt,
)
from kelpie_dst.shims import ScriptedPolicy, sim_ports

from .harness import activate, create_agent, make_env, node_kv, say

ALL = (
    "send_message",
    "conversation_search",
    "conversation_search_date",
    "archival_memory_insert",
    "archival_memory_search",
    "core_memory_append",
    "core_memory_replace",
    "memory_replace",
    "memory_insert",
    "memory_rethink",
    "memory_finish_edits",
    "pause_heartbeats",
    "run_code",
)
ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})


async def _agent(**options: Any) -> tuple[Any, Any]:
    return await create_agent(
        make_env(ECHO),
        node_kv(),
        tools=[builtin_id(n) for n in ALL],
        blocks=(
            BlockCreate("human", "Name: Ada", limit=40),
            BlockCreate("persona", "I am fixed.", read_only=True),
        ),
        **options,
    )


async def run(actor: Any, name: str, **args: Any) -> ToolRunResult:
    result = await actor.handle(RunTool(name, args))
    assert isinstance(result, ToolRunResult)
    return result


@pytest.mark.dst(seeds=3, guards="strict")
async def test_memory_tools_through_run_tool_keep_lettas_rules() -> None:
    """Appends, replaces, inserts and rethinks change the block; read-only blocks, limits and
    unknown labels fail with Letta's messages and change nothing."""
    actor, _ = await _agent()
    assert (
        await run(actor, "core_memory_append", label="human", content="Likes kelp")
    ).status == "success"
    ok = await run(actor, "memory_replace", label="human", old_string="kelp", new_string="otters")
    assert ok.func_return.startswith("The core memory block with label `human` has been edited.")
    await run(actor, "memory_insert", label="human", new_string="Lives by the sea", insert_line=1)
    block = await actor.handle(GetBlock("human"))
    assert block.value == "Name: Ada\nLives by the sea\nLikes otters"
    over = await run(actor, "core_memory_append", label="human", content="x" * 30)
    assert (
        over.status == "error"
        and "Edit failed: Exceeds 40 character limit (requested 70)" in over.func_return
    )
    locked = await run(actor, "memory_rethink", label="persona", new_memory="I changed.")
    assert locked.func_return == (
        "Error executing function memory_rethink: ValueError: Error This block is read-only and "
        "cannot be edited."
    )
    missing = await run(
        actor, "core_memory_replace", label="pets", old_content="a", new_content="b"
    )
    assert (
        "KeyError: Block field pets does not exist (available sections = human, persona)"
        in missing.func_return
    )
    assert (await actor.handle(GetBlock("human"))).value == block.value
    created = await run(actor, "memory_rethink", label="plans", new_memory="Sail north.")
    assert created.status == "success"
    assert (await actor.handle(GetBlock("plans"))).value == "Sail north."
    with pytest.raises(InvalidRequestError, match="bad arguments at 'insert_line'"):
        await run(actor, "memory_insert", label="human", new_string="x", insert_line="one")


@pytest.mark.dst(seeds=3, guards="strict")
async def test_archival_memory_insert_and_search_with_tags_and_dates(dst: Any) -> None:
    """Inserted passages are found by meaning, filtered by tags (any/all) and dates
    (inclusive, date-only means the whole day), listed in order, deleted by id."""
    actor, _ = await _agent()
    await run(
        actor,
        "archival_memory_insert",
        content="Sarah has a golden retriever named Biscuit.",
        tags=["pets", "sarah"],
    )
    await trio.sleep(2 * 86400)  # two days later (the node's wall clock follows virtual time)
    await run(
        actor,
        "archival_memory_insert",
        content="The quarterly report is due on Friday.",
        tags=["work"],
    )
    found = json.loads(
        (
            await run(actor, "archival_memory_search", query="What is the name of Sarah's dog?")
        ).func_return
    )
    assert found[0]["content"].startswith("Sarah has a golden retriever")
    assert json.loads(
        (await run(actor, "archival_memory_search", query="dog", tags=["work"])).func_return
    )[0]["tags"] == ["work"]
    both = await run(
        actor, "archival_memory_search", query="x", tags=["pets", "work"], tag_match_mode="all"
    )
    assert json.loads(both.func_return) == []
    day_one = await run(
        actor,
        "archival_memory_search",
        query="report",
        start_datetime="2026-01-01",
        end_datetime="2026-01-01",
    )
    assert [p["content"][:5] for p in json.loads(day_one.func_return)] == ["Sarah"]
    bad = await run(actor, "archival_memory_search", query="x", start_datetime="last tuesday")
    assert (
        bad.status == "error" and "Invalid start_datetime format: last tuesday" in bad.func_return
    )
    listed = await actor.handle(ListPassages())
    assert [p.text[:5] for p in listed] == ["Sarah", "The q"]
    hits = await actor.handle(SearchPassages("quarterly report", top_k=1))
    assert hits[0].passage.id == listed[1].id and hits[0].score > 0
    await actor.handle(DeletePassage(listed[0].id))
    assert [p.id for p in await actor.handle(ListPassages())] == [listed[1].id]
    inserted = await actor.handle(InsertPassage("A third memory", ("x",)))
    assert inserted[0].tags == ("x",)


@pytest.mark.dst(seeds=3, guards="strict")
async def test_conversation_search_finds_past_messages_by_words_roles_and_dates() -> None:
    """conversation_search ranks messages by the query's words (roles and dates filter);
    conversation_search_date pages through a day, five per page; no hits says so."""
    actor, _ = await _agent()
    for text in (
        "I adopted a cat named Miso",
        "The weather is grey",
        "Miso likes tuna",
        "Tuesday is laundry day",
        "cats and dogs",
        "one",
        "two",
    ):
        await say(actor, text)
    found = (await run(actor, "conversation_search", query="Miso tuna")).func_return
    assert found.startswith("Showing ")
    results = json.loads(found.split(": ", 1)[1])
    # both words: the message and its echo, newest first; then one word
    assert [(r["role"], r["content"]) for r in results[:2]] == [
        ("assistant", "echo: Miso likes tuna"),
        ("user", "Miso likes tuna"),
    ]
    assert "Miso" in results[2]["content"]
    only_assistant = json.loads(
        (
            await run(actor, "conversation_search", query="Miso", roles=["assistant"], limit=1)
        ).func_return.split(": ", 1)[1]
    )
    assert only_assistant == [
        {
            "timestamp": only_assistant[0]["timestamp"],
            "role": "assistant",
            "content": "echo: Miso likes tuna",
        }
    ]
    assert (
        await run(actor, "conversation_search", query="zebra")
    ).func_return == "No results found."
    future = await run(actor, "conversation_search", query="Miso", start_date="2027-01-01")
    assert future.func_return == "No results found."
    page0 = (
        await run(actor, "conversation_search_date", start_date="2026-01-01", end_date="2026-01-01")
    ).func_return
    assert page0.startswith("Showing 5 of 14 results (page 0/2): ")
    page2 = (
        await run(
            actor,
            "conversation_search_date",
            start_date="2026-01-01",
            end_date="2026-01-01",
            page=2,
        )
    ).func_return
    assert page2.startswith("Showing 4 of 14 results (page 2/2): ")


@pytest.mark.dst(seeds=3, guards="strict")
async def test_run_code_runs_python_and_shell_in_the_sandbox() -> None:
    """run_code: output comes back; a failing command is a failed result with its stderr."""
    actor, _ = await _agent()
    py = await run(actor, "run_code", code="print(sum(range(10)))", language="python")
    assert (py.status, py.func_return, py.stdout) == ("success", "45\n", ("45",))
    sh = await run(actor, "run_code", code="echo hi > f.txt && cat f.txt", language="shell")
    assert sh.func_return == "hi\n"
    bad = await run(actor, "run_code", code="raise ValueError('nope')", language="python")
    assert bad.status == "error" and "exit code 1: ValueError: nope" in bad.func_return


@pytest.mark.dst(seeds=3, guards="strict")
async def test_shared_blocks_registry_and_typed_errors() -> None:
    """A standalone block attached to two agents: an edit by one is seen by the other. The tool
    registry lists built-ins and custom tools, rejects duplicate names (a typed conflict, checked
    in the writing transaction), and the actor gives typed errors: unknown agent, bad label,
    limit exceeded, a label already taken, react agents without memory."""
    kv = node_kv()
    blocks = BlockStore(kv, sim_ports())
    shared = await blocks.create("team", "We like tides.", limit=100)
    a, a_view = await _agent()
    b, _ = await _agent()
    await a.handle(AttachBlock(shared.id))
    await b.handle(AttachBlock(shared.id))
    await run(a, "core_memory_append", label="team", content="And kelp.")
    assert (await b.handle(GetBlock("team"))).value == "We like tides.\nAnd kelp."
    with pytest.raises(BlockLimitError, match="over its limit 100"):
        await b.handle(UpdateBlock("team", value="x" * 101))
    with pytest.raises(BlockNotFoundError, match="no block labelled 'nope'"):
        await b.handle(UpdateBlock("nope", value="x"))
    with pytest.raises(NameConflictError, match="already has a block labelled 'team'"):
        await a.handle(AttachBlock((await blocks.create("team")).id))

    tools = ToolStore(kv, sim_ports())
    spec = await tools.create("def shout(text: str) -> str:\n    return text.upper()\n")
    with pytest.raises(NameConflictError, match="already exists"):
        await tools.create("def shout(words: str) -> str:\n    return words\n")
    replaced = await tools.upsert("def shout(words: str) -> str:\n    return words.upper() + '!'\n")
    assert replaced.id == spec.id and "words" in replaced.parameters["properties"]
    assert [t.name for t in (await tools.list())][:2] == ["send_message", "conversation_search"]
    await a.handle(AttachTool(spec.id))
    assert (await run(a, "shout", words="hey")).func_return == "HEY!"
    assert "shout" in [t.name for t in await a.handle(ListTools())]

    react, _ = await create_agent(make_env(ECHO), kv, agent_type="react_agent", tools=[])
    with pytest.raises(InvalidRequestError, match="a react_agent has no memory tools"):
        await react.handle(AttachTool(builtin_id("core_memory_append")))

    await a.handle(DeleteAgent())
    with pytest.raises(AgentNotFoundError):
        await a.handle(GetAgent())
    ghost = await activate(make_env(ECHO), kv, a_view.agent.id)
    with pytest.raises(AgentNotFoundError):
        await say(ghost, "anyone?")
    assert (await b.handle(GetBlock("team"))).value.endswith("And kelp.")  # blocks outlive agents


@pytest.mark.dst(seeds=3, guards="strict")
async def test_agent_metadata_initial_messages_and_updates() -> None:
    """CreateAgent stores metadata, blocks, tools and initial messages (before any run);
    UpdateAgent changes only the updatable fields and validates them."""
    kv = node_kv()
    actor, view = await create_agent(
        make_env(ECHO),
        kv,
        tags=("a", "b"),
        metadata={"team": "kelp"},
        initial_messages=(InputMessage("assistant", "Hi, I'm Otto."),),
    )
    assert view.agent.tags == ("a", "b") and view.agent.metadata == {"team": "kelp"}
    assert [b.label for b in view.blocks] == ["persona", "human"]
    assert view.last_stop_reason is None and len(view.message_ids) == 2
    system, first = await actor.handle(ListMessages(order="asc"))
    assert view.message_ids == (system.id, first.id)
    assert is_prompt(system) and "<memory_blocks>" in system.content
    assert (first.message_type, first.content, first.run_id) == (
        "assistant_message",
        "Hi, I'm Otto.",
        None,
    )
    await say(actor, "hello")
    updated = await actor.handle(UpdateAgent({"name": "otto", "tags": ["x"], "max_tokens": 100}))
    assert (updated.agent.name, updated.agent.tags, updated.agent.max_tokens) == (
        "otto",
        ("x",),
        100,
    )
    assert updated.agent.updated_at >= updated.agent.created_at
    assert updated.last_stop_reason == "end_turn"
    with pytest.raises(InvalidRequestError, match="cannot update agent_type"):
        await actor.handle(UpdateAgent({"agent_type": "react_agent"}))
    with pytest.raises(InvalidRequestError, match="max_tokens must be an int >= 1"):
        await actor.handle(UpdateAgent({"max_tokens": 0}))
    reread = await activate(make_env(ECHO), kv, view.agent.id)
    assert (await reread.handle(GetAgent())).agent == updated.agent
