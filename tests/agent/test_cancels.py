"""Cancelling runs: the node's cancel table, and a cancel that reaches a run its request no
longer drives (Dlead21-4): the agent's next activation resumes the interrupted run inside
``activate``, and the resumed loop must still hear the cancel of the request that started it,
or a cancel asked while it runs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import AgentEnv, CancelTable, GetSession
from kelpie_agent.agent._cancels import PARKED
from kelpie_agent.mcp import McpClient
from kelpie_dst.shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from kelpie_dst.shims._mcp import sim_mcp_transport

from .harness import activate, say, stored_messages, stored_session
from .test_recovery_dst import CONFIG, _setup, _successes, _until_done, counter_server


def test_a_registration_is_found_by_each_key_and_removed_cleanly() -> None:
    table, a, b = CancelTable(), trio.Event(), trio.Event()
    table.add("agent-1", a)
    table.add("conv-1", a)
    table.add("agent-1", b)
    table.bind("run-1", a)
    table.bind("run-1", a)  # bound once
    table.bind("run-2", None)  # a request without a cancel binds nothing
    assert table.keys_of(a) == ["agent-1", "conv-1", "run-1"]
    assert table.events("run-1") == [a] and table.events("run-2") == []
    table.remove("agent-1", a)
    assert table.events("agent-1") == [b]  # the other run of the agent is still reachable
    assert table.cancel("agent-1") == 1 and b.is_set() and not a.is_set()
    assert table.cancel("run-1") == 1 and a.is_set()
    for key in table.keys_of(a):
        table.remove(key, a)
    table.remove("agent-1", b)
    assert table.keys_of(a) == [] and table.events("agent-1") == [] and table.cancel("x") == 0


def test_a_resumed_run_registers_its_own_cancel_only_when_no_request_is_bound() -> None:
    table, request = CancelTable(), trio.Event()
    with table.of_run("run-1", "agent-1", "conv-1") as cancel:
        assert len(table.events("agent-1")) == 1 and len(table.events("conv-1")) == 1
        assert not cancel.is_set()
        assert table.cancel("conv-1") == 1 and cancel.is_set()
    assert table.events("agent-1") == table.events("conv-1") == table.events("run-1") == []
    table.bind("run-2", request)
    with table.of_run("run-2", "agent-1", None) as cancel:
        assert table.events("agent-1") == []  # the retrying request is registered there
        assert not cancel.is_set()
        request.set()
        assert cancel.is_set()
    assert table.events("run-2") == [request]  # the request's registration removes it


def test_a_parked_cancel_reaches_the_run_when_it_is_resumed_here() -> None:
    """A request that gave up while its run may still be unfinished leaves its event parked:
    a cancel asked meanwhile is counted and heard by the run's resume, which then drops it."""
    table, request = CancelTable(), trio.Event()
    for key in ("agent-1", "conv-1"):
        table.add(key, request)
    table.bind("run-1", request)
    table.park(request)
    assert table.cancel("agent-1") == 1 and request.is_set()
    with table.of_run("run-1", "agent-1", "conv-1") as cancel:
        assert cancel.is_set()  # the cancel asked while nobody drove the run
        assert len(table.events("agent-1")) == 2  # and the resume is reachable on its own
    assert table.keys_of(request) == [] and table.events("agent-1") == []


def test_a_node_keeps_at_most_parked_events_oldest_dropped_first() -> None:
    table = CancelTable()
    events = [trio.Event() for _ in range(PARKED + 1)]
    for n, event in enumerate(events):
        table.add("agent-1", event)
        table.bind(f"run-{n}", event)
        table.park(event)
    assert table.events("run-0") == [] and table.events(f"run-{PARKED}") == [events[-1]]
    assert table.cancel("agent-1") == PARKED


async def _interrupted_run(
    sim: kelpie_dst.Simulation, *, bound: bool
) -> tuple[CancelTable, str, Any, kelpie_dst.Node, trio.Event]:
    """An agent's 5-call tool run, interrupted by a crash of its node after about 2 calls;
    the node restarts and its next activation resumes the run. ``cancels`` outlives the crash
    and stands for the service of a lease lost without a crash, whose retrying request keeps
    its registration (with ``bound``, the request's cancel is bound to the run)."""
    db, kv, agent_id, policy = await _setup(sim)
    server = counter_server(Counter())
    cancels, cancel = CancelTable(), trio.Event()

    async def agent_node(node: kelpie_dst.Node) -> None:
        async with McpClient([CONFIG], transport=sim_mcp_transport(server)) as mcp:
            llm = SimLlmClient(policy, timing=LlmTiming(0.2, 0.5, 50.0))
            env = AgentEnv(llm=llm, mcp=mcp, cancels=cancels)
            actor = await activate(env, open_kv(node, host=db), agent_id, sim_ports(node))
            if await actor.handle(GetSession()) is None:
                await say(actor, "count to five", cancel=cancel if bound else None)
            await trio.sleep_forever()

    node = sim.add_node("agent", agent_node)
    while len(_successes(await stored_messages(kv, agent_id))) < 2:
        await trio.sleep(0.1)
    sim.crash(node)
    return cancels, agent_id, kv, node, cancel


@pytest.mark.dst(seeds=3, guards="strict", max_time=600)
async def test_a_resumed_run_stops_on_the_cancel_of_the_request_that_started_it(
    dst: kelpie_dst.Simulation,
) -> None:
    cancels, agent_id, kv, node, cancel = await _interrupted_run(dst, bound=True)
    [run_id] = cancels.keys_of(cancel)  # bound when the run started
    cancel.set()  # asked while no activation drives the run
    dst.restart(node, after=1.0)
    await _until_done(kv, agent_id)
    session = await stored_session(kv, agent_id)
    assert session is not None and session.session_id == run_id
    assert session.stop_reason == "cancelled", session.stop_reason
    assert len(_successes(await stored_messages(kv, agent_id))) < 5


@pytest.mark.dst(seeds=3, guards="strict", max_time=600)
async def test_a_cancel_asked_while_a_run_is_resumed_reaches_it(
    dst: kelpie_dst.Simulation,
) -> None:
    cancels, agent_id, kv, node, _ = await _interrupted_run(dst, bound=False)
    assert cancels.cancel(agent_id) == 0  # nothing drives the run while the node is down
    dst.restart(node, after=1.0)
    while cancels.cancel(agent_id) == 0:  # until the resumed run registers its own cancel
        await trio.sleep(0.05)
    await _until_done(kv, agent_id)
    session = await stored_session(kv, agent_id)
    assert session is not None and session.stop_reason == "cancelled", session.stop_reason
    assert cancels.events(agent_id) == []  # the resumed run's registration is gone
