"""An agent's sandbox network follows its allow-list (``agent_sandbox_network``).

An agent's tools reach only the hosts its ``metadata.sandbox_allow_hosts`` names, narrowed by
the server's own list (``kelpie serve --sandbox-allow-host``, docs/sandbox.md); the agent's
list may change at any time, and the next tool call runs under the new one. No other scenario
gives an agent an allow-list, changes one, or has a tool reach a host, so a live sandbox kept
after its agent's list changed (a host removed from the list stays reachable), or a pattern
matched wrong, ran everywhere and failed nowhere (the session-15 blind test, sandK).

Here server nodes (``topology.nodes``) share a database host; each node's sandbox factory
gives the agent's requested network, under a server-wide ceiling (:data:`CEILING`), to a
sandbox whose Python has a simulated ``fetch(host, port)``: it answers ``200 host:port`` when
the sandbox's network allows the destination (the allow check of the real proxy,
``SandboxNetwork.allows``) and raises ``PermissionError`` (a 403) otherwise. A client makes
``agents`` letta_v1 agents with ``run_code`` only, each with an allow-list drawn from
:data:`LISTS`; before each of its ``messages`` directives it may replace the agent's list
(``update_agent``, retried until acknowledged). The simulated model answers each directive
with one or two ``run_code`` calls that fetch a host of :data:`DESTINATIONS`, then with
text. Nodes crash and restart and sandboxes crash or fail to boot, so agents move and their
sandboxes come and go.

``sandbox_network_follows_agent`` reads each agent's history back and judges every committed
``run_code`` fetch: it reached its host exactly when the list in force when its directive was
sent (or one set after it) and the ceiling both allow it, judged by :func:`allowed`, written
from the pattern table of docs/sandbox.md, not by the server's matcher.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import random
import re
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.actors import DispatcherOptions
from kelpie_agent.agent import (
    CreateAgent,
    InputMessage,
    LoopConfig,
    ToolCallMessage,
    ToolReturnMessage,
    builtin_id,
)
from kelpie_agent.llm import LlmRequest
from kelpie_agent.sandbox import SandboxNetwork, SandboxRequest
from kelpie_agent.service import open_agent_node

from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, open_sandbox, sim_ports
from ..shims.llm._turns import Call, Reply
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_schedules import SERVICE, Client
from ._tool_rule_model import result_message

__all__ = [
    "CEILING",
    "DESTINATIONS",
    "LISTS",
    "FetchPolicy",
    "agent_sandbox_network",
    "allowed",
    "judge_fetches",
    "sandbox_network_follows_agent",
]

# The server's own list: every destination must match it too (api.example.org is never
# reachable, whatever an agent's list says).
CEILING = ("*.example.com", "example.com", "data.example.org:443")
# The agents' lists (patterns as docs/sandbox.md writes them), the empty one included.
LISTS: tuple[tuple[str, ...], ...] = (
    (),
    ("api.example.com",),
    ("*.example.com",),
    ("api.example.com:443",),
    ("example.com", "data.example.org"),
    ("API.Example.com", "api.example.org"),
    ("*.api.example.com", "data.example.org:8443"),
)
DESTINATIONS: tuple[tuple[str, int], ...] = (
    ("api.example.com", 443),
    ("api.example.com", 80),
    ("www.example.com", 443),
    ("example.com", 443),
    ("evilexample.com", 443),
    ("v2.api.example.com", 443),
    ("data.example.org", 443),
    ("data.example.org", 8443),
    ("api.example.org", 443),
)
DIRECTIVE = re.compile(r"^sn-a(\d+)-m(\d+)\b")
TAG = re.compile(r"'(sn-a(\d+)-m(\d+)-c\d+)'")
MAX_CALLS = 2
TOOL_TIMEOUT = 10.0
# Agents stay where they are between directives (each client prefers its agent's home node,
# and an idle agent is kept a minute), so a sandbox outlives a change of its agent's list
# unless a crash ends it.
OPTIONS = DispatcherOptions(
    idle_timeout=60.0,
    lease_duration=6.0,
    renew_every=1.5,
    lease_margin=2.5,
    acquire_timeout=30.0,
    poll_interval=0.5,
)


# A custom tool that fetches, whose source defines a public helper first: the tool is the
# last public top-level function (Letta's rule, docs/tools/custom_tools.md).
TOOL = "fetch_url"
TOOL_SOURCE = '''def describe(host: str, port: int) -> str:
    """Say where a fetch goes."""
    return f"{host}:{port}"


def fetch_url(host: str, port: int = 443, note: str = "") -> str:
    """Fetch a host from the sandbox.

    Args:
        host: The host to reach.
        port: Its port.
        note: Anything, for the caller's records.
    """
    return fetch(host, port)
'''


def tool_signature() -> tuple[str, list[str], list[str]]:
    """(name, parameters, required) of :data:`TOOL_SOURCE`'s tool, by ``inspect``."""
    namespace: dict[str, Any] = {}
    exec(compile(TOOL_SOURCE, "<fetch_url>", "exec"), namespace)
    fn = namespace[TOOL]
    params = inspect.signature(fn).parameters.values()
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    return fn.__name__, [p.name for p in params], required


def _matches(pattern: str, host: str, port: int) -> bool:
    """docs/sandbox.md's table: ``host`` (any port), ``*.domain`` (any subdomain of it, not
    the domain itself), ``host:port`` (that port only); names compare in any case."""
    pattern = pattern.lower()
    name, _, wanted = pattern.partition(":")
    if wanted and int(wanted) != port:
        return False
    host = host.lower()
    if name.startswith("*."):
        domain = name[2:]
        return host.endswith("." + domain) and host != domain
    return host == name


def allowed(patterns: tuple[str, ...], host: str, port: int) -> bool:
    """Whether an agent with allow-list ``patterns`` may reach ``host:port`` on a server
    whose own list is :data:`CEILING`."""
    return any(_matches(p, host, port) for p in patterns) and any(
        _matches(p, host, port) for p in CEILING
    )


def fetch_code(host: str, port: int, tag: str) -> str:
    return f"print(fetch({host!r}, {port}), {tag!r})"


@attrs.define
class FetchPolicy:
    """The simulated model: one or two fetches for each directive, then text; half of them
    to a destination the list the client set for the directive allows (``lists``), so both
    answers are common."""

    lists: dict[int, list[tuple[str, ...]]] = attrs.Factory(dict)
    requests: int = 0
    calls: int = 0

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        self.requests += 1
        directive, steps = None, 0
        for message in reversed(request.messages):
            if message.role == "assistant":
                steps += 1
            elif message.role == "user":
                directive = DIRECTIVE.match(message.text.strip())
                break
        offered = {t.name for t in request.tools}
        if directive is None or "run_code" not in offered or steps >= MAX_CALLS:
            return (f"Done after {steps} fetch(es).",)
        if steps and rng.random() < 0.4:
            return ("Fetched.",)
        self.calls += 1
        agent, k = int(directive.group(1)), int(directive.group(2))
        known = self.lists.get(agent, [])
        patterns = known[k] if k < len(known) else ()
        fits = [d for d in DESTINATIONS if allowed(patterns, *d)]
        host, port = rng.choice(fits if fits and rng.random() < 0.5 else DESTINATIONS)
        tag = f"sn-a{directive.group(1)}-m{directive.group(2)}-c{self.calls}"
        if TOOL in offered and rng.random() < 0.5:
            return (Call(TOOL, {"host": host, "port": port, "note": tag}),)
        return (Call("run_code", {"code": fetch_code(host, port, tag), "language": "python"}),)


@attrs.frozen
class Fetch:
    """A committed fetch: the message it answered, where it went, what it gave."""

    agent: int
    message: int
    host: str
    port: int
    ok: bool
    text: str
    tool: str = "run_code"


@attrs.define
class NetworkLog:
    agents: dict[int, str] = attrs.Factory(dict)
    lists: dict[int, list[tuple[str, ...]]] = attrs.Factory(dict)  # in force per message
    policy: FetchPolicy = attrs.field(init=False)
    fetches: list[Fetch] = attrs.Factory(list)
    updates: int = 0
    problems: list[str] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        self.policy = FetchPolicy(self.lists)


def _sandbox_factory(node: kelpie_dst.Node) -> Any:
    ceiling = SandboxNetwork(CEILING)

    def make(request: SandboxRequest) -> Any:
        network = request.network.under(ceiling)  # as kelpie serve narrows it

        def fetch(host: str, port: int = 443) -> str:
            if not network.allows(host, port):
                raise PermissionError(f"403 {host}:{port} is not allowed by the sandbox network")
            return f"200 {host}:{port}"

        return open_sandbox(node, name="net-tools", network=network, services={"fetch": fetch})

    return make


def _start(ctx: WorkloadContext, policy: FetchPolicy) -> dict[str, Any]:
    db = ctx.sim.add_node(ctx.topology.database or "db")
    services: dict[str, Any] = {}

    async def server(node: kelpie_dst.Node) -> None:
        async with contextlib.AsyncExitStack() as stack:
            service = await stack.enter_async_context(
                open_agent_node(
                    open_kv(node, host=db),
                    sim_ports(node),
                    node_id=node.name,
                    llm=SimLlmClient(policy, timing=LlmTiming()),
                    sandbox_factory=_sandbox_factory(node),
                    loop_config=LoopConfig(tool_timeout=TOOL_TIMEOUT),
                    dispatcher_options=OPTIONS,
                    options=SERVICE,
                    observer=kelpie_dst.log,
                    **coherence_options(ctx, db),
                )
            )
            services[node.name] = service
            await trio.sleep_forever()

    for name in ctx.topology.nodes or ("server-1", "server-2", "server-3"):
        ctx.sim.add_node(name, server)
    return services


class HomeClient(Client):
    """A client that calls its home node while it is up (any live node otherwise)."""

    def __init__(self, ctx: WorkloadContext, services: dict[str, Any], rng: str, home: str):
        super().__init__(ctx, services, rng)
        self.home = home

    def service(self) -> Any:
        service = self.services.get(self.home)
        if service is not None and service.running:
            return service
        return super().service()


def _metadata(patterns: tuple[str, ...]) -> dict[str, Any]:
    return {"sandbox_allow_hosts": list(patterns)}


async def _converse(client: HomeClient, log: NetworkLog, number: int, messages: int) -> None:
    agent_id = log.agents[number]
    lists = log.lists[number]
    for k in range(messages):
        current = lists[-1]
        if k and client.rng.random() < 0.6:
            current = client.rng.choice([p for p in LISTS if p != current])
            await client.until_done(
                lambda s, c=current: s.update_agent(agent_id, {"metadata": _metadata(c)})  # type: ignore[misc]
            )
            log.updates += 1
        if k:
            lists.append(current)
        text = f"sn-a{number}-m{k} fetch something"
        inputs = (InputMessage("user", text, otid=f"sn-{number}-{k}"),)
        await client.until_done(
            lambda s, i=inputs: s.send_message(agent_id, i, max_steps=MAX_CALLS + 2)  # type: ignore[misc]
        )
        await trio.sleep(client.rng.uniform(0.5, 3))


async def _read_back(client: Client, log: NetworkLog) -> None:
    for number, agent_id in log.agents.items():
        history = await client.until_done(
            lambda s, a=agent_id: s.list_messages(a, limit=1000, order="asc")  # type: ignore[misc]
        )
        calls: dict[str, tuple[int, str, int]] = {}
        names: dict[str, str] = {}
        for m in history:
            if isinstance(m, ToolCallMessage) and m.tool_call.name == "run_code":
                try:
                    code = str(json.loads(m.tool_call.arguments).get("code", ""))
                except ValueError:
                    continue
                found = TAG.search(code)
                where = re.match(r"print\(fetch\('([^']*)', (\d+)\)", code)
                if found and where and int(found.group(2)) == number:
                    calls[m.tool_call.tool_call_id] = (
                        int(found.group(3)),
                        where.group(1),
                        int(where.group(2)),
                    )
            elif isinstance(m, ToolCallMessage) and m.tool_call.name == TOOL:
                try:
                    args = json.loads(m.tool_call.arguments)
                except ValueError:
                    continue
                found = TAG.search(repr(str(args.get("note", ""))))
                if found and int(found.group(2)) == number:
                    host, port = str(args.get("host")), int(args.get("port", 443))
                    calls[m.tool_call.tool_call_id] = (int(found.group(3)), host, port)
                    names[m.tool_call.tool_call_id] = TOOL
            elif isinstance(m, ToolReturnMessage) and m.tool_call_id in calls:
                k, host, port = calls[m.tool_call_id]
                text = result_message(m.tool_return)
                name = names.get(m.tool_call_id, "run_code")
                ok = m.status == "success"
                log.fetches.append(Fetch(number, k, host, port, ok, text, name))


def judge_fetches(log: NetworkLog) -> list[str]:
    """Each committed fetch reached its host exactly when a list in force from its message on
    (and the ceiling) allows it; failures other than the network's refusal are not judged."""
    problems = list(log.problems)
    for fetch in log.fetches:
        lists = log.lists[fetch.agent][fetch.message :]
        if fetch.ok:
            reached = fetch.text.startswith(f"200 {fetch.host}:{fetch.port}")
            if not reached:
                problems.append(
                    f"a{fetch.agent} m{fetch.message}: fetch of {fetch.host}:{fetch.port} "
                    f"succeeded with {fetch.text[:120]!r}"
                )
                continue
        elif "PermissionError" in fetch.text and "403" in fetch.text:
            reached = False
        else:
            continue  # a crash, a timeout, a restore that failed: not the network's answer
        if not any(allowed(patterns, fetch.host, fetch.port) == reached for patterns in lists):
            verb = "reached" if reached else "was refused"
            problems.append(
                f"a{fetch.agent} m{fetch.message}: {fetch.host}:{fetch.port} {verb}, though "
                f"the agent's allow-list {list(lists[0])} (and any set after it: "
                f"{[list(p) for p in lists[1:]]}) under the server's {list(CEILING)} says "
                f"{'no' if reached else 'yes'}"
            )
    return problems


@workload(
    params={"agents": 3, "messages": 6},
    sizes=("agents", "messages"),
    bounds={"agents": (1, 50), "messages": (1, 100)},
)
async def agent_sandbox_network(ctx: WorkloadContext) -> None:
    """Agents whose allow-lists change fetch hosts from their sandboxes; see the module
    docstring."""
    log = NetworkLog()
    ctx.state["log"] = log
    services = _start(ctx, log.policy)
    client = Client(ctx, services, "sandbox-network")
    nodes = sorted(ctx.topology.nodes or ("server-1", "server-2", "server-3"))
    await trio.sleep(0.5)
    tool = await client.until_done(lambda s: s.upsert_tool(TOOL_SOURCE))
    name, names, required = tool_signature()
    params = dict(tool.parameters)
    shown = (tool.name, list(params.get("properties", {})), list(params.get("required", [])))
    if shown != (name, names, required):
        log.problems.append(
            f"the custom tool from a source with a helper first is {shown} (name, parameters, "
            f"required), not its last public function's {(name, names, required)}"
        )
    for number in range(int(ctx.params["agents"])):
        first = client.rng.choice(LISTS)
        request = CreateAgent(
            name=f"net-{number}",
            agent_type="letta_v1_agent",
            tool_ids=(builtin_id("run_code"), tool.id),
            metadata=_metadata(first),
        )
        view = await client.until_done(
            lambda s, r=request: s.create_agent(r, include_base_tools=False)  # type: ignore[misc]
        )
        log.agents[number] = view.agent.id
        log.lists[number] = [first]
    messages = int(ctx.params["messages"])
    async with trio.open_nursery() as nursery:
        for number in log.agents:
            home = HomeClient(
                ctx, services, f"sandbox-network/{number}", nodes[number % len(nodes)]
            )
            nursery.start_soon(_converse, home, log, number, messages)
    await _read_back(client, log)
    ctx.metric("sandbox_network.requests", log.policy.requests)
    ctx.metric("sandbox_network.updates", log.updates)
    ctx.metric("sandbox_network.fetches", len(log.fetches))
    ctx.metric("sandbox_network.reached", sum(f.ok for f in log.fetches))
    ctx.metric("sandbox_network.custom_tool", sum(f.tool == TOOL for f in log.fetches))
    ctx.metric(
        "sandbox_network.refused",
        sum(not f.ok and "PermissionError" in f.text for f in log.fetches),
    )


@invariant
def sandbox_network_follows_agent(ctx: WorkloadContext) -> None:
    """Every committed fetch reached its host exactly when the agent's allow-list in force
    (and the server's ceiling) allows it, by the documented pattern rules."""
    log: NetworkLog = ctx.state["log"]
    problems = judge_fetches(log)
    shown = "; ".join(problems[:3]) + (f"; ... ({len(problems)} in all)" if problems[3:] else "")
    assert not problems, shown
