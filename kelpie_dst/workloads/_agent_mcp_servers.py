"""MCP servers added, updated, refreshed and removed while tools are called (issue #18).

One agent node serves an agent with the managed server's tool attached. A churn task creates
the ``ticker`` server (a ``SimMcpServer``, so the ``mcp.*`` faults apply), updates it (sending
its secret back masked), refreshes it and deletes it, several times; callers meanwhile call its
tool through the node's MCP source (the agent executor's path), each call with a unique ``n``.

The oracle (:func:`check`):

- every call that reported success executed exactly once on the server; no ``n`` executed
  twice; a call that started while no server record existed never executed and ended with an
  explicit tool error;
- after every refresh, the agent still has the tool attached (same id);
- every process of the server was started with its secret (an update never loses it).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import CreateAgent
from kelpie_agent.errors import KelpieError
from kelpie_agent.mcp import McpConnectionError, McpServerConfig
from kelpie_agent.service import UnavailableError, open_agent_node
from kelpie_agent.service import _mcp_catalog as catalog

from ..scenario import WorkloadContext, invariant, workload
from ..shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from ..shims._mcp import SimMcpServer, sim_mcp_transport

__all__ = ["agent_mcp_servers", "mcp_calls_exactly_once"]

SECRET = "s3cret"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@attrs.define
class Log:
    """What the workload saw: executions on the server, call outcomes, problems."""

    executed: list[int] = attrs.Factory(list)
    outcomes: dict[int, tuple[str, bool]] = attrs.Factory(dict)  # n -> (result, live at start)
    configs: list[McpServerConfig] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    refresh_failures: int = 0
    live: bool = False  # False: certainly no server record (after a delete, before a create)


def ticker(log: Log) -> SimMcpServer:
    def tick(args: dict[str, Any]) -> str:
        log.executed.append(int(args["n"]))
        return f"tick {args['n']}"

    tools = [
        {"name": "tick", "description": "Tick once.", "input_schema": SCHEMA, "response": tick}
    ]
    return SimMcpServer("ticker", tools, latency=(0.01, 0.2), start_latency=(0.01, 0.1))


@attrs.define
class Recorder:
    server: SimMcpServer
    log: Log

    def __call__(self, config: McpServerConfig) -> AbstractAsyncContextManager[Any]:
        self.log.configs.append(config)
        return sim_mcp_transport(self.server)(config)


async def churn(service: Any, log: Log, rounds: int, rng: Any) -> None:
    agent = (await service.create_agent(CreateAgent(name="ticking"))).agent
    for number in range(rounds):
        log.live = True  # from before the create starts: "no record" must be certain
        record = await catalog.create_server(
            service, "ticker", "stdio", {"command": "ticker", "args": [], "env": {"T": SECRET}}
        )
        tools = await catalog.server_tool_list(service, record.id)
        for _ in range(3):  # the server may have crashed while create listed its tools
            if tools:
                break
            with contextlib.suppress(UnavailableError):
                await catalog.refresh_server(service, record.id)
            tools = await catalog.server_tool_list(service, record.id)
        if tools:
            await service.attach_tool(agent.id, tools[0].id)
        await trio.sleep(rng.uniform(0.2, 1.0))
        await catalog.update_server(
            service, record.id, None, {"args": [f"--round={number}"], "env": {"T": "****"}}
        )
        try:
            await catalog.refresh_server(service, record.id)
        except UnavailableError:  # the server crashed or did not start: a 503, as users see
            log.refresh_failures += 1
        attached = [t.id for t in await service.list_agent_tools(agent.id)]
        if tools and tools[0].id not in attached:
            log.problems.append(f"round {number}: refresh detached {tools[0].id} from the agent")
        await trio.sleep(rng.uniform(0.2, 1.0))
        await catalog.delete_server(service, record.id)
        log.live = False  # only once the delete is done
        await trio.sleep(rng.uniform(0.1, 0.5))


async def caller(service: Any, log: Log, first: int, count: int, rng: Any) -> None:
    for n in range(first, first + count):
        live = log.live
        try:
            result = await service.mcp_servers.call_tool("ticker", "tick", {"n": n})
            outcome = "success" if not result.is_error else "error"
        except KelpieError as error:
            outcome = f"error: {type(error).__name__}"
            if isinstance(error, McpConnectionError):  # crashed: start it again, as the
                with contextlib.suppress(KelpieError):  # executor does (not retrying n)
                    await service.mcp_servers.reconnect("ticker")
        log.outcomes[n] = (outcome, live)
        await trio.sleep(rng.uniform(0.05, 0.4))


@workload(
    params={"rounds": 4, "callers": 3, "calls": 12},
    sizes=("callers", "calls"),
    bounds={"rounds": (1, 50), "callers": (1, 20), "calls": (1, 200)},
)
async def agent_mcp_servers(ctx: WorkloadContext) -> None:
    """Churn the managed MCP server while callers call its tool; see the module docstring."""
    log = Log()
    ctx.state["log"] = log
    done = trio.Event()
    params = ctx.params

    async def node_main(node: kelpie_dst.Node) -> None:
        rng = ctx.rng("mcp_servers")
        async with open_agent_node(
            open_kv(node),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming()),
            mcp_transport=Recorder(ticker(log), log),
            observer=kelpie_dst.log,
        ) as service:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(churn, service, log, params["rounds"], rng)
                for i in range(params["callers"]):
                    calls = params["calls"]
                    nursery.start_soon(caller, service, log, i * calls, calls, rng)
            done.set()

    ctx.sim.add_node("n1", node_main)
    await done.wait()
    ctx.metric("mcp.calls", len(log.outcomes))
    ctx.metric("mcp.executed", len(log.executed))
    ctx.metric("mcp.refresh_failures", log.refresh_failures)


def check(log: Log) -> list[str]:
    """The oracle's findings (empty: all is well)."""
    problems = list(log.problems)
    counts: dict[int, int] = {}
    for n in log.executed:
        counts[n] = counts.get(n, 0) + 1
    for n, count in sorted(counts.items()):
        if count > 1:
            problems.append(f"call {n} executed {count} times")
    for n, (outcome, live) in sorted(log.outcomes.items()):
        ran = counts.get(n, 0)
        if outcome == "success" and ran != 1:
            problems.append(f"call {n} reported success but executed {ran} times")
        if not live and ran:
            problems.append(f"call {n} started with no server record, yet executed")
        if not live and outcome == "success":
            problems.append(f"call {n} started with no server record, yet succeeded")
    for config in log.configs:
        if config.env_dict.get("T") != SECRET:
            problems.append(f"server started without its secret (args {list(config.args)})")
    return problems


@invariant
def mcp_calls_exactly_once(ctx: WorkloadContext) -> None:
    """Managed MCP servers under churn: see :func:`check`."""
    problems = check(ctx.state["log"])
    assert not problems, "; ".join(problems[:5])
