"""AgentActor under the real actor runtime (kelpie_agent.actors.Dispatcher): idle deactivation
and reactivation, and a node crash in the middle of a tool loop with the agent moving to
another node, which finishes the interrupted run before serving the next request."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.actors import ActorId, Dispatcher, DispatcherOptions
from kelpie_agent.agent import (
    AgentActor,
    AgentEnv,
    BlockCreate,
    CreateAgent,
    GetSession,
    InputMessage,
    ListMessages,
    SendMessage,
    ToolStore,
    TurnResult,
    UserMessage,
)
from kelpie_agent.mcp import McpClient
from kelpie_dst.shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from kelpie_dst.shims._mcp import sim_mcp_transport

from .harness import CountingPolicy, check_history, stored_messages, stored_session
from .test_recovery_dst import CALLS, CONFIG, SCHEMA, _successes, counter_server

OPTIONS = DispatcherOptions(
    idle_timeout=5.0,
    lease_duration=6.0,
    renew_every=1.5,
    lease_margin=2.5,
    acquire_timeout=30.0,
    poll_interval=0.5,
    shutdown_timeout=2.0,
)


def _dispatcher(node: kelpie_dst.Node, kv: Any, env: AgentEnv) -> Dispatcher:
    return Dispatcher(
        kv,
        sim_ports(node),
        node_id=node.name,
        factories={"agent": lambda _: AgentActor(env)},
        options=OPTIONS,
        observer=kelpie_dst.log,
    )


@pytest.mark.dst(seeds=5, guards="strict")
async def test_through_the_dispatcher_an_idle_agent_deactivates_and_comes_back_whole(
    dst: kelpie_dst.Simulation,
) -> None:
    """Requests go through the Dispatcher; after the idle timeout the agent is deactivated, and
    the next request reactivates it from storage with its memory and history intact."""
    node = dst.current_node()
    assert node is not None
    kv = open_kv(node)
    env = AgentEnv(llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming()))
    dispatcher = _dispatcher(node, kv, env)
    agent = ActorId("agent", sim_ports(node).ids.new("agent"))
    async with trio.open_nursery() as nursery:
        await nursery.start(dispatcher.run)
        from .harness import base_tools

        await dispatcher.request(
            agent,
            CreateAgent(
                name="otto",
                agent_type="memgpt_agent",
                memory_blocks=(BlockCreate("human", ""),),
                tool_ids=base_tools("memgpt_agent"),
            ),
        )
        first = await dispatcher.request(
            agent, SendMessage((InputMessage("user", "My name is Ada"),))
        )
        assert isinstance(first, TurnResult) and first.stop_reason == "end_turn"
        await trio.sleep(OPTIONS.idle_timeout * 2)
        assert agent not in dispatcher.active()  # deactivated while idle
        again = await dispatcher.request(
            agent, SendMessage((InputMessage("user", "what is my name?"),))
        )
        assert again.reply == "Your name is Ada."
        history = await dispatcher.request(agent, ListMessages(order="asc"))
        assert [m.content for m in history if isinstance(m, UserMessage) and m.kind == "input"] == [
            "My name is Ada",
            "what is my name?",
        ]
        nursery.cancel_scope.cancel()


@pytest.mark.dst(seeds=5, guards="strict", max_time=900)
async def test_a_node_crash_mid_tool_loop_moves_the_agent_and_the_run_finishes_elsewhere(
    dst: kelpie_dst.Simulation,
) -> None:
    """Two server nodes share a database. The node running an agent's 5-call tool loop
    crashes; a request arriving at the other node waits for the lease, activates the agent
    there, which resumes the interrupted run (no completed call repeated) and then serves the
    request. The request is served exactly once: retried with the same otid, it returns the
    same run."""
    db = dst.add_node("db")
    main_kv = open_kv(dst.current_node(), host=db)  # type: ignore[arg-type]
    spec = await ToolStore(main_kv, sim_ports()).add_mcp_tool(
        "counter", "tick", "Count once.", SCHEMA
    )
    executions: Counter[int] = Counter()
    server = counter_server(executions)
    policy = CountingPolicy("tick", CALLS)
    agent = ActorId("agent", sim_ports().ids.new("agent"))
    dispatchers: dict[str, Dispatcher] = {}

    async def server_node(node: kelpie_dst.Node) -> None:
        kv = open_kv(node, host=db)
        async with McpClient([CONFIG], transport=sim_mcp_transport(server)) as mcp:
            env = AgentEnv(llm=SimLlmClient(policy, timing=LlmTiming(0.2, 0.5, 50.0)), mcp=mcp)
            dispatcher = _dispatcher(node, kv, env)
            dispatchers[node.name] = dispatcher
            await dispatcher.run()

    a = dst.add_node("server-a", server_node)
    dst.add_node("server-b", server_node)
    await trio.sleep(0.1)
    await dispatchers["server-a"].request(agent, CreateAgent(name="counter", tool_ids=(spec.id,)))

    async def start_loop(node: kelpie_dst.Node) -> None:
        await dispatchers[node.name].request(agent, SendMessage((InputMessage("user", "count"),)))

    a.start_soon(start_loop, a)  # dies with server-a
    await trio.sleep(dst.rng("test/crash").uniform(0.5, 6.0))
    committed = set(_successes(await stored_messages(main_kv, agent.id)))
    dst.crash(a)
    follow_up = SendMessage((InputMessage("user", "anything else?", otid="otid-follow-up"),))
    result = await dispatchers["server-b"].request(agent, follow_up)
    assert isinstance(result, TurnResult)
    retry = await dispatchers["server-b"].request(agent, follow_up)
    assert retry.run_id == result.run_id  # the same request again is not a second run
    stored = await check_history(main_kv, agent.id)
    assert sorted(_successes(stored)) == list(range(1, CALLS + 1))
    for n in committed:
        assert executions[n] == 1
    assert sum(executions.values()) <= CALLS + 1
    session = await stored_session(main_kv, agent.id)
    assert session is not None and session.session_id == result.run_id
    assert await dispatchers["server-b"].request(agent, GetSession()) == session
    assert agent in dispatchers["server-b"].active()
    kelpie_dst.log("moved", committed=sorted(committed), executions=sorted(executions.items()))
