"""Agent files (.af): export then import is lossless (settings, blocks, tools with their
source, tool rules, folders, every message type); a file written to Letta's documented v2
schema imports; bad files are refused with one line naming the field."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import attrs
import pytest

from kelpie_agent.agent import (
    AgentMessage,
    AgentView,
    ApprovalDecision,
    ApprovalRequestMessage,
    AttachFolder,
    BlockStore,
    CloseFile,
    CreateAgent,
    FolderStore,
    GetAgent,
    InputMessage,
    InvalidRequestError,
    ListAgentFiles,
    SendMessage,
    ToolRule,
    ToolStore,
    is_prompt,
    letta_json,
)
from kelpie_agent.agent._af_export import export_agent
from kelpie_agent.agent._af_import import import_agent_file
from kelpie_agent.agent._agent_file import parse_agent_file
from kelpie_agent.embeddings import HashingEmbedder
from kelpie_agent.llm import LlmRequest, ToolResult
from kelpie_dst.shims import sim_ports
from kelpie_dst.shims.llm import Call, Reply

from .harness import (
    activate,
    check_history,
    create_agent,
    make_env,
    node_kv,
    say,
    stored_messages,
)

FIXTURE = Path(__file__).parent / "fixtures" / "letta_v2_agent.af"
SKIP = {"id", "date", "run_id", "step_id", "seq_id"}


@attrs.define
class Scripted:
    """Per turn: the planned calls, one step each, then a text answer."""

    turns: list[list[tuple[str, dict[str, Any]]]]
    plan: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        last = request.messages[-1]
        if not any(isinstance(b, ToolResult) for b in last.content) and self.turns:
            self.plan = list(self.turns.pop(0))
        if self.plan:
            name, args = self.plan.pop(0)
            return ("thinking " + name, Call(name, args))
        return ("all done",)


async def _read(op: Any, what: str) -> Any:
    return await op()


def _shape(messages: list[AgentMessage]) -> list[dict[str, Any]]:
    return [{k: v for k, v in letta_json(m).items() if k not in SKIP} for m in messages]


async def _importer(env: Any, kv: Any) -> tuple[Any, dict[str, Any]]:
    actors: dict[str, Any] = {}
    ports = sim_ports()

    async def create(request: CreateAgent) -> AgentView:
        agent_id = ports.ids.new("agent")
        actor = await activate(env, kv, agent_id, ports)
        actors[agent_id] = actor
        view: AgentView = await actor.handle(request)
        return view

    async def request(agent_id: str, message: object) -> Any:
        return await actors[agent_id].handle(message)

    return (create, request), actors


@pytest.mark.dst(seeds=2, guards="strict")
async def test_export_then_import_is_lossless() -> None:
    kv = node_kv()
    ports = sim_ports()
    tools, blocks, folders = ToolStore(kv, ports), BlockStore(kv, ports), FolderStore(kv, ports)
    note = await tools.create("def note(n: int) -> str:\n    return f'noted {n}'\n")
    gate = await tools.create(
        "def gate(n: int) -> str:\n    return f'opened {n}'\n", default_requires_approval=True
    )
    folder = await folders.create("docs", description="d", instructions="i")
    await folders.upload(folder.id, "a.txt", b"alpha\nbeta\ngamma\n")
    for file_id in await folders.pending():
        await folders.process(file_id, HashingEmbedder(), "kelpie-hash-v1")
    policy = Scripted([[("note", {"n": 1}), ("note", {"n": 2})], [("gate", {"n": 3})]])
    rules = (
        ToolRule("note", "max_count_per_step", 5),
        ToolRule("gate", "constrain_child_tools", children=("note",)),
    )
    env = make_env(policy)
    actor, view = await create_agent(
        env, kv, tools=[note.id, gate.id], tool_rules=rules, tags=("x",), metadata={"k": 1}
    )
    await actor.handle(AttachFolder(folder.id))
    await say(
        actor,
        "first",
    )
    stopped = await say(actor, "second")
    call = next(m for m in stopped.messages if isinstance(m, ApprovalRequestMessage))
    answer = InputMessage(
        "approval", "", otid="ok", approvals=(ApprovalDecision(call.tool_call.tool_call_id, True),)
    )
    await actor.handle(SendMessage((answer,)))
    document = await export_agent(kv, _read, view.agent.id, now=ports.clock.now())
    text = json.dumps(document)  # what agents.export_file answers
    plan = parse_agent_file(text)
    (create, request), _ = await _importer(env, kv)
    [new_id] = await import_agent_file(
        plan, tools=tools, blocks=blocks, folders=folders, create=create, request=request
    )
    old_msgs = await stored_messages(kv, view.agent.id)
    new_msgs = await stored_messages(kv, new_id)
    assert _shape(new_msgs) == _shape(old_msgs)
    assert [m.step_id is None for m in new_msgs] == [m.step_id is None for m in old_msgs]
    old = (await actor.handle(GetAgent())).agent
    imported = await activate(env, kv, new_id)
    new_view = await imported.handle(GetAgent())
    new = new_view.agent
    assert new.name == f"{old.name}_copy"
    assert new.tool_ids == old.tool_ids  # tools matched by name: the same tools
    assert new.tool_rules == old.tool_rules and new.tags == old.tags
    assert (new.system, new.agent_type, new.model, dict(new.metadata)) == (
        old.system,
        old.agent_type,
        old.model,
        dict(old.metadata),
    )
    old_blocks = [(b.label, b.value, b.limit, b.read_only) for b in view.blocks]
    assert [(b.label, b.value, b.limit, b.read_only) for b in new_view.blocks] == old_blocks
    assert {b.id for b in new_view.blocks}.isdisjoint({b.id for b in view.blocks})
    files = await imported.handle(ListAgentFiles())
    assert [f.name for f in files] == ["docs_(1)/a.txt"] and files[0].state.is_open
    again = parse_agent_file(json.dumps(await export_agent(kv, _read, new_id, now=0.0)))
    assert [len(a.messages) for a in again.agents] == [len(plan.agents[0].messages)]


class _ProcessedAtOnce:
    """A FolderStore whose uploads are processed before the upload returns: the node's
    document processing won the race with the import's attach."""

    def __init__(self, folders: FolderStore) -> None:
        self.folders = folders

    def __getattr__(self, name: str) -> Any:
        return getattr(self.folders, name)

    async def upload(self, *args: Any, **kwargs: Any) -> Any:
        stored = await self.folders.upload(*args, **kwargs)
        if stored is not None:
            await self.folders.process(stored.id, HashingEmbedder(), "kelpie-hash-v1")
        return stored


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_closed_file_stays_closed_though_processed_before_the_attach() -> None:
    """The agent file says which files are open; attaching the folder opens every processed
    file, so the import closes them before it opens the file's open ones (DreqK-1)."""
    kv = node_kv()
    ports = sim_ports()
    tools, blocks, folders = ToolStore(kv, ports), BlockStore(kv, ports), FolderStore(kv, ports)
    folder = await folders.create("docs")
    for name in ("a.txt", "b.txt", "c.txt"):
        await folders.upload(folder.id, name, f"{name} alpha\nbeta\n".encode())
    for file_id in await folders.pending():
        await folders.process(file_id, HashingEmbedder(), "kelpie-hash-v1")
    env = make_env(Scripted([]))
    actor, view = await create_agent(env, kv)
    await actor.handle(AttachFolder(folder.id))
    [b] = [f for f in await actor.handle(ListAgentFiles()) if f.record.file_name == "b.txt"]
    await actor.handle(CloseFile(b.record.id))
    document = await export_agent(kv, _read, view.agent.id, now=ports.clock.now())
    (create, request), _ = await _importer(env, kv)
    [new_id] = await import_agent_file(
        parse_agent_file(json.dumps(document)),
        tools=tools,
        blocks=blocks,
        folders=_ProcessedAtOnce(folders),  # type: ignore[arg-type]
        create=create,
        request=request,
    )
    imported = await activate(env, kv, new_id)
    states = {f.record.file_name: f.state.is_open for f in await imported.handle(ListAgentFiles())}
    assert states == {"a.txt": True, "b.txt": False, "c.txt": True}


@pytest.mark.dst(seeds=2, guards="strict")
async def test_a_file_written_to_lettas_schema_imports() -> None:
    kv = node_kv()
    ports = sim_ports()
    env = make_env(Scripted([]))
    document = json.loads(FIXTURE.read_text())
    refund_def = next(t for t in document["tools"] if t["name"] == "refund")
    refund_def["metadata_"] = {"team": "billing"}  # Letta's tool metadata survives the import
    plan = parse_agent_file(json.dumps(document))
    (create, request), actors = await _importer(env, kv)
    [agent_id] = await import_agent_file(
        plan,
        tools=ToolStore(kv, ports),
        blocks=BlockStore(kv, ports),
        folders=FolderStore(kv, ports),
        create=create,
        request=request,
        name="otter",
    )
    view = await actors[agent_id].handle(GetAgent())
    agent = view.agent
    assert (agent.name, agent.agent_type, agent.model) == (
        "otter",
        "memgpt_agent",
        "anthropic/claude-sonnet-4-5-20250929",
    )
    assert (agent.context_window, agent.max_tokens, agent.max_files_open) == (180000, 8192, 3)
    assert [r.type for r in agent.tool_rules] == [
        "run_first",
        "requires_approval",
        "exit_loop",
        "constrain_child_tools",
        "max_count_per_step",
    ]
    assert [t.name for t in view.tools] == [
        "lookup_order",
        "refund",
        "send_message",
        "core_memory_append",
        "open_files",  # the file tools come with the attached folder, as in Letta
        "grep_files",
        "semantic_search_files",
    ]
    refund = next(t for t in view.tools if t.name == "refund")
    assert refund.default_requires_approval and dict(refund.metadata) == {"team": "billing"}
    assert [(b.label, b.read_only) for b in view.blocks] == [("persona", False), ("human", True)]
    shapes = [letta_json(m)["message_type"] for m in await stored_messages(kv, agent_id)]
    assert shapes == [
        "system_message",
        "user_message",
        "reasoning_message",  # memgpt: an assistant's text is its inner thought
        "tool_call_message",
        "tool_return_message",
        "user_message",  # the heartbeat
        "reasoning_message",
        "approval_request_message",
        "approval_response_message",
        "tool_return_message",
    ]
    messages = await stored_messages(kv, agent_id)
    assert is_prompt(messages[0])  # the file's system message is the stored prompt, kept as is
    assert (
        messages[0].content
        == json.loads(FIXTURE.read_text())["agents"][0]["messages"][0]["content"][0]["text"]
    )
    await check_history(kv, agent_id)
    assert messages[4].stdout == ("looked up 42",) and messages[1].otid == "otid-1"
    assert messages[5].kind == "heartbeat"
    [file] = await actors[agent_id].handle(ListAgentFiles())
    assert file.name == "policies/refunds.md" and file.state.is_open
    assert (file.state.start_line, file.state.end_line) == (0, 2)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("agents"), "not a v2 agent file"),
        (lambda d: d["agents"][0]["messages"][2].update(role="robot"), r"messages\[2\]\.role"),
        (lambda d: d["agents"][0].update(block_ids=["block-9"]), r"block_ids: 'block-9'"),
        (
            lambda d: d["agents"][0]["tool_rules"].append({"tool_name": "x", "type": "?"}),
            "tool_rules\\[5\\]",
        ),
        (lambda d: d.update(groups=[{"id": "group-0"}]), "groups"),
    ],
)
def test_bad_agent_files_are_refused_naming_the_field(change: Any, match: str) -> None:
    data = json.loads(FIXTURE.read_text())
    change(data)
    with pytest.raises(InvalidRequestError, match=match):
        parse_agent_file(json.dumps(data))
    with pytest.raises(InvalidRequestError, match="not JSON"):
        parse_agent_file(b"{nope")
