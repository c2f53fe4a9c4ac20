"""The production path: ``open_agent_node`` under plain trio (real time, no simulator) with
``system_ports()``, a real SQLite file and the SimLLM's helpful policy (docs/llm.md: outside a
simulation it draws from its own seeded streams and injects no faults). Agents, blocks,
messages, passages, tools and the otid records survive a restart of the service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from kelpie_agent.actors import DispatcherOptions
from kelpie_agent.agent import BlockCreate, CreateAgent, InputMessage
from kelpie_agent.ports import system_ports
from kelpie_agent.sandbox import ProcessSandbox
from kelpie_agent.service import AgentService, open_agent_node
from kelpie_agent.storage import SqliteKV
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient

FAST = DispatcherOptions(
    idle_timeout=0.5,
    lease_duration=2.0,
    renew_every=0.2,
    lease_margin=0.5,
    acquire_timeout=5.0,
    poll_interval=0.05,
    shutdown_timeout=2.0,
)


@asynccontextmanager
async def _node(path: Path, node_id: str = "local") -> AsyncIterator[AgentService]:
    kv = await SqliteKV.open(path)
    try:
        async with open_agent_node(
            kv,
            system_ports(),
            node_id=node_id,
            llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming.instant()),
            sandbox_factory=lambda _: ProcessSandbox(parent_dir=path.parent),
            dispatcher_options=FAST,
        ) as service:
            yield service
    finally:
        await kv.close()


def _say(text: str, otid: str | None = None) -> tuple[InputMessage, ...]:
    return (InputMessage("user", text, otid=otid),)


@pytest.mark.trio
@pytest.mark.bubblewrap
async def test_agents_blocks_messages_passages_and_tools_survive_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kelpie.db"
    async with _node(path) as svc:
        notes = await svc.create_block("notes", "kelp grows fast")
        tool = await svc.create_tool("def add(a: int, b: int) -> int:\n    return a + b\n")
        view = await svc.create_agent(
            CreateAgent(
                name="otto",
                agent_type="memgpt_agent",
                memory_blocks=(BlockCreate("persona", "I am Otto."), BlockCreate("human", "")),
                block_ids=(notes.id,),
                tags=("demo",),
            ),
        )
        agent_id = view.agent.id
        first = await svc.send_message(agent_id, _say("My name is Ada", otid="otid-ada"))
        assert first.stop_reason == "end_turn"
        stored = await svc.send_message(agent_id, _say("remember that otters hold hands"))
        assert stored.reply == "Got it, I'll remember that."
        [passage] = await svc.insert_passage(agent_id, "tides turn twice a day", tags=("sea",))
        await svc.attach_tool(agent_id, tool.id)
        before = await svc.get_agent(agent_id)
        history = await svc.list_messages(agent_id, order="asc")
        passages = await svc.list_passages(agent_id)
        assert len(passages) == 2

    async with _node(path) as svc:  # a new process on the same file
        assert await svc.get_agent(agent_id) == before
        assert [v.agent.id for v in await svc.list_agents(tags=["demo"])] == [agent_id]
        assert (await svc.get_agent_block(agent_id, "human")).value == "\nName: Ada"
        assert (await svc.get_block(notes.id)).value == "kelp grows fast"
        assert await svc.list_messages(agent_id, order="asc") == history
        assert await svc.list_passages(agent_id) == passages
        hits = await svc.search_passages(agent_id, "tides", top_k=1)
        assert hits[0].passage == passage
        ran = await svc.run_tool(agent_id, "add", {"a": 1, "b": 2})  # a real subprocess
        assert (ran.status, ran.func_return) == ("success", "3")
        again = await svc.send_message(agent_id, _say("My name is Ada", otid="otid-ada"))
        assert again == first  # the retried message is not run a second time
        answer = await svc.send_message(agent_id, _say("what is my name?"))
        assert answer.reply == "Your name is Ada."
        report = await svc.repair()
        assert (report.agents, report.entries_added, report.entries_removed) == (1, 0, 0)

    async with _node(path, node_id="other") as svc:  # another node id: the lease was released
        assert len(await svc.list_messages(agent_id, limit=1000)) == len(history) + 2
        await svc.delete_agent(agent_id)
        assert await svc.list_agents() == []
