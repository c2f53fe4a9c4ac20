"""Crashes and checkpoints: a run interrupted in the middle of a tool loop resumes from its
checkpoint without repeating a completed tool call, and a session moves to another agent.

The tool is an MCP tool on a SimMcpServer whose handler counts executions per argument: a
side effect outside the agent that a crash cannot erase.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentEnv,
    AgentStorageError,
    ExportSession,
    GetSession,
    ImportSession,
    LoopConfig,
    SessionSnapshot,
    ToolReturnMessage,
    ToolStore,
    TurnResult,
)
from kelpie_agent.mcp import McpClient, McpServerConfig
from kelpie_agent.storage import KV, StorageUnavailableError, Transaction
from kelpie_dst.shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from kelpie_dst.shims._mcp import SimMcpServer, sim_mcp_transport

from .harness import (
    CountingPolicy,
    activate,
    check_history,
    create_agent,
    say,
    stored_messages,
    stored_session,
)

CALLS = 5
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
CONFIG = McpServerConfig("counter", "simulated", startup_timeout=10, call_timeout=30)


def counter_server(executions: Counter[int]) -> SimMcpServer:
    def tick(args: dict[str, Any]) -> str:
        executions[int(args["n"])] += 1
        return f"tick {args['n']}"

    return SimMcpServer(
        "counter",
        [
            {
                "name": "tick",
                "description": "Count once.",
                "input_schema": SCHEMA,
                "response": tick,
                "latency": [0.2, 1.0],
            }
        ],
        latency=(0.1, 0.3),
        start_latency=0.05,
    )


def _successes(messages: list[Any]) -> list[int]:
    out = []
    for m in messages:
        if isinstance(m, ToolReturnMessage) and m.name == "tick" and m.status == "success":
            out.append(int(m.tool_return.split("tick ", 1)[1].split('"', 1)[0]))
    return out


async def _setup(sim: kelpie_dst.Simulation) -> tuple[kelpie_dst.Node, Any, str, CountingPolicy]:
    db = sim.add_node("db")  # the database host: never crashes
    kv = open_kv(sim.current_node(), host=db)  # type: ignore[arg-type]
    spec = await ToolStore(kv, sim_ports()).add_mcp_tool("counter", "tick", "Count once.", SCHEMA)
    policy = CountingPolicy("tick", CALLS)
    env = AgentEnv(llm=SimLlmClient(policy))
    _, view = await create_agent(env, kv, tools=[spec.id])
    return db, kv, view.agent.id, policy


async def _until_done(kv: Any, agent_id: str) -> None:
    while True:
        session = await stored_session(kv, agent_id)
        if session is not None and not session.running:
            return
        await trio.sleep(0.5)


async def crash_mid_loop(sim: kelpie_dst.Simulation, explicit_crash: bool = True) -> dict[str, Any]:
    db, kv, agent_id, policy = await _setup(sim)
    executions: Counter[int] = Counter()
    server = counter_server(executions)
    outcomes: list[str] = []

    async def agent_node(node: kelpie_dst.Node) -> None:
        node_kv = open_kv(node, host=db)
        async with McpClient([CONFIG], transport=sim_mcp_transport(server)) as mcp:
            timing = LlmTiming(0.2, 0.5, 50.0)
            env = AgentEnv(llm=SimLlmClient(policy, timing=timing), mcp=mcp)
            actor = await activate(env, node_kv, agent_id, sim_ports(node))  # resumes a run
            if actor.resumed is not None:
                outcomes.append(f"resumed:{actor.resumed.stop_reason}")
            if await actor.handle(GetSession()) is None:
                outcomes.append(f"sent:{(await say(actor, 'count to five')).stop_reason}")
            await trio.sleep_forever()

    node = sim.add_node("agent", agent_node)
    committed: set[int] = set()
    if explicit_crash:
        await trio.sleep(sim.rng("test/crash").uniform(0.0, 8.0))
        committed = set(_successes(await stored_messages(kv, agent_id)))
        sim.crash(node)
        sim.restart(node, after=1.0)
    await _until_done(kv, agent_id)
    stored = await check_history(kv, agent_id)
    session = await stored_session(kv, agent_id)
    assert session is not None and session.stop_reason == "end_turn", session
    assert sorted(_successes(stored)) == list(range(1, CALLS + 1))  # each call answered once
    for n in committed:
        assert executions[n] == 1, (n, executions)  # recorded before the crash: never again
    assert all(executions[n] >= 1 for n in range(1, CALLS + 1))
    crashes = node.incarnation - 1
    assert sum(executions.values()) <= CALLS + crashes  # only a call in flight may run twice
    kelpie_dst.log(
        "recovery",
        committed=sorted(committed),
        executions=sorted(executions.items()),
        outcomes=outcomes,
        crashes=crashes,
    )
    return {"committed": len(committed), "crashes": crashes, "outcomes": outcomes}


@pytest.mark.dst(seeds=5, guards="strict", max_time=600)
async def test_a_crash_mid_tool_loop_resumes_without_repeating_completed_calls(
    dst: kelpie_dst.Simulation,
) -> None:
    """The agent's node crashes at a random moment of a 5-call tool loop and restarts: the next
    activation resumes from the checkpoint; every call is answered exactly once, a call whose
    result was recorded before the crash never runs again, and only the call in flight at the
    crash may run a second time."""
    await crash_mid_loop(dst)


@pytest.mark.dst(
    seeds=5,
    guards="strict",
    max_time=900,
    faults=["storage.crash_before_write=0.1", "storage.crash_after_write=0.1"],
)
async def test_crashes_at_storage_writes_resume_without_repeating_completed_calls(
    dst: kelpie_dst.Simulation,
) -> None:
    """The node crashes just before or just after a storage write (the write lost, or durable
    but unacknowledged), possibly several times: the same guarantees hold."""
    await crash_mid_loop(dst, explicit_crash=False)


def test_crashes_really_land_in_the_middle_of_the_loop() -> None:
    """Across seeds, the explicit crash hits runs with some calls already recorded (so the
    resume path, not only a restart, is exercised)."""
    hits = 0
    for seed in range(8):
        result = kelpie_dst.run(crash_mid_loop, seed=seed, guards="strict", max_time=600)
        assert result.ok, result.failure and result.failure.describe()
        hits += 0 < result.value["committed"] < CALLS
    assert hits >= 2, hits


@pytest.mark.dst(seeds=5, guards="strict", max_time=600)
async def test_an_interrupted_session_moves_to_another_agent_and_finishes_there(
    dst: kelpie_dst.Simulation,
) -> None:
    """Agent A's run is interrupted mid-loop; its session is exported to agent B, which
    resumes it: completed calls are not repeated, A's session is closed as transferred, B's
    history holds the whole session, and importing the same snapshot again changes nothing."""
    _, kv, a_id, policy = await _setup(dst)
    executions: Counter[int] = Counter()
    async with McpClient([CONFIG], transport=sim_mcp_transport(counter_server(executions))) as mcp:
        config = LoopConfig(resume_on_activate=False)
        env = AgentEnv(
            llm=SimLlmClient(policy, timing=LlmTiming(0.2, 0.5, 50.0)), mcp=mcp, config=config
        )
        a = await activate(env, kv, a_id)
        spec = await ToolStore(kv, sim_ports()).by_name("tick")
        assert spec is not None
        b, b_view = await create_agent(env, kv, tools=[spec.id])
        with trio.move_on_after(dst.rng("test/interrupt").uniform(0.3, 3.0)):
            await say(a, "count to five")
        before = _successes(await stored_messages(kv, a_id))
        fresh_a = await activate(env, kv, a_id)  # as after a crash (no automatic resume)
        snapshot = await fresh_a.handle(ExportSession(b_view.agent.id))
        assert isinstance(snapshot, SessionSnapshot)
        result = await b.handle(ImportSession(snapshot))
        assert isinstance(result, TurnResult) and result.stop_reason == "end_turn"
        again = await b.handle(ImportSession(snapshot))
        assert again.run_id == result.run_id
    a_session = await stored_session(kv, a_id)
    assert a_session is not None and a_session.transferred_to == b_view.agent.id
    assert not a_session.running
    b_stored = await check_history(kv, b_view.agent.id)
    assert sorted(_successes(b_stored)) == list(range(1, CALLS + 1))
    for n in before:
        assert executions[n] == 1
    assert sum(executions.values()) <= CALLS + 1
    b_session = await stored_session(kv, b_view.agent.id)
    assert b_session is not None and b_session.transferred_from == a_id
    kelpie_dst.log("transfer", before=before, executions=sorted(executions.items()))


class _NoCommits:
    """A store whose reads work and whose writes all fail: a database that went read-only."""

    def __init__(self, kv: KV) -> None:
        self._kv = kv
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)

    def _refuse(self) -> None:
        self.refused += 1
        raise StorageUnavailableError("the database is read-only")

    async def set(self, key: bytes, value: bytes) -> None:
        self._refuse()

    async def delete(self, key: bytes) -> None:
        self._refuse()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        async with self._kv.transaction() as txn:
            yield txn
            self._refuse()  # before the commit: rolled back


@pytest.mark.dst(seeds=3, guards="strict", max_time=900)
async def test_an_activation_whose_resume_cannot_write_fails_and_the_next_one_resumes(
    dst: kelpie_dst.Simulation,
) -> None:
    """A run is interrupted mid-loop; the next activation loads the agent but every write of
    its resume fails. The activation must fail (like a failed load), not serve with the run
    left ``running``; the activation after it resumes the run to its end, and no call whose
    result was recorded runs again."""
    _, kv, agent_id, policy = await _setup(dst)
    executions: Counter[int] = Counter()
    async with McpClient([CONFIG], transport=sim_mcp_transport(counter_server(executions))) as mcp:
        llm = SimLlmClient(policy, timing=LlmTiming(0.2, 0.5, 50.0))
        quiet = AgentEnv(llm=llm, mcp=mcp, config=LoopConfig(resume_on_activate=False))
        first = await activate(quiet, kv, agent_id)
        with trio.move_on_after(dst.rng("test/interrupt").uniform(0.3, 3.0)):
            await say(first, "count to five")
        interrupted = await stored_session(kv, agent_id)
        assert interrupted is not None and interrupted.running
        before = _successes(await stored_messages(kv, agent_id))
        env = AgentEnv(llm=llm, mcp=mcp)
        read_only = _NoCommits(kv)
        with pytest.raises(AgentStorageError):
            await activate(env, read_only, agent_id)  # type: ignore[arg-type]
        assert read_only.refused > 0
        again = await activate(env, kv, agent_id)
        assert again.resumed is not None and again.resumed.stop_reason == "end_turn"
    session = await stored_session(kv, agent_id)
    assert session is not None and not session.running and session.stop_reason == "end_turn"
    stored = await check_history(kv, agent_id)
    assert sorted(_successes(stored)) == list(range(1, CALLS + 1))
    for n in before:
        assert executions[n] == 1, (n, executions)


def test_crash_recovery_is_deterministic_across_processes() -> None:
    """The crash-and-resume scenario gives the same trace hash twice in this process and in a
    fresh process with another hash seed."""
    kelpie_dst.assert_deterministic(
        crash_mid_loop, seeds=(3,), runs=3, vary_hashseed=True, guards="strict", max_time=600
    )
