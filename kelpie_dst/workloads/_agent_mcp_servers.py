"""MCP servers added, updated, refreshed and removed while tools are called (issue #18).

The nodes of ``topology.nodes`` (one, or several over ``topology.database``, crashing and
restarting) serve an agent with the managed server's tool attached. A churn task on the first
node creates the ``ticker`` server (a ``SimMcpServer``, so the ``mcp.*`` faults apply), updates
it (sending its secret back masked), refreshes it and deletes it, several times, going on with
its round after a crash; callers spread over the nodes meanwhile call its tool through their
node's MCP source (the agent executor's path), each call with a unique ``n`` (never resent).

The oracle (:func:`check`):

- every call that reported success executed exactly once on the server; no ``n`` executed
  twice; a call that started while no server record existed (after a delete finished) never
  executed unless a create started before it ran, and ended with an explicit tool error
  unless a create started before it ended (another node's cached client must not reach the
  deleted server);
- after every refresh, the agent still has the tool attached (same id);
- every process of the server was started with its secret (an update never loses it).

With ``rotate`` (off by default; ``agent_mcp_rotation``), each round's update rotates the
secret instead of sending it back masked, and nothing else: the server "upgrades" with it
(the process started with secret version ``v`` lists ``tick`` with an argument ``v`` that
must equal ``v``). Once that update and the refresh after it returned, until the round's
delete starts, the record certainly says version ``v``, and callers send ``v``. Then
(:func:`check_rotation`) every such call ran on a process started with version ``v``'s
secret and was never refused for its arguments: an update takes effect on the next call; and
after each such refresh the registered ``tick`` (what agents are offered) has version ``v``'s
schema (:func:`check_registered`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import CreateAgent
from kelpie_agent.errors import KelpieError
from kelpie_agent.mcp import (
    McpClient,
    McpConnectionError,
    McpServerConfig,
    McpStartupTimeoutError,
    McpTimeoutError,
    parse_mcp_config,
)
from kelpie_agent.service import UnavailableError, open_agent_node
from kelpie_agent.service import _mcp_catalog as catalog

from .._errors import UsageError
from ..scenario import WorkloadContext, invariant, workload
from ..shims import HelpfulPolicy, LlmTiming, SimLlmClient, open_kv, sim_ports
from ..shims._mcp import SimMcpServer, sim_mcp_transport
from ._mcp_catalog_walk import CatalogLog, Routed, catalog_servers, check_catalog, walk_catalog

__all__ = [
    "agent_mcp_servers",
    "mcp_calls_exactly_once",
    "mcp_calls_time_out_on_time",
    "mcp_catalog_consistent",
]

SECRET = "s3cret"
# With ``http`` (rtN, session 18): the ticker as a Streamable HTTP server, its secret the
# token of its auth header, beside a custom header that is a secret too.
URL = "http://ticker.mcp.sim/mcp"
AUTH_HEADER = "Authorization"
CUSTOM_HEADERS = {"X-Tenant": "kelp-tenant"}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


# With ``rotate``: two static servers from an ``mcp_config.json`` document (docs/mcp.md), and
# what each must be started with, written from that format (not by the parser).
STATIC_CONFIG = {
    "mcpServers": {
        "clock": {
            "command": "clock-server",
            "args": ["--tz", "UTC", "-v"],
            "env": {"TZ": "UTC", "API_KEY": "k1"},
            "cwd": "/srv/clock",
            "startup_timeout": 7,
            "call_timeout": 9,
        },
        "atlas": {"command": "atlas", "args": ["serve"]},
    }
}
STATIC_EXPECTED: dict[
    str, tuple[str, tuple[str, ...], dict[str, str], str | None, float, float]
] = {
    "atlas": ("atlas", ("serve",), {}, None, 30.0, 60.0),
    "clock": (
        "clock-server",
        ("--tz", "UTC", "-v"),
        {"TZ": "UTC", "API_KEY": "k1"},
        "/srv/clock",
        7.0,
        9.0,
    ),
}


def secret(version: int) -> str:
    """The secret of version ``version`` (with ``rotate``; 0 is the plain one)."""
    return SECRET if version == 0 else f"{SECRET}-v{version}"


def versioned_schema(version: int) -> dict[str, Any]:
    """``tick``'s schema as the process started with version ``version``'s secret lists it."""
    v = {"type": "integer", "minimum": version, "maximum": version}
    return {"type": "object", "properties": {"n": {"type": "integer"}, "v": v}, "required": ["n"]}


@attrs.define
class Log:
    """What the workload saw: executions on the server, call outcomes, problems."""

    executed: list[int] = attrs.Factory(list)
    # n -> (result, live at start, creates started before it started, ... before it ended)
    outcomes: dict[int, tuple[str, bool, int, int]] = attrs.Factory(dict)
    ran_in: dict[int, int] = attrs.Factory(dict)  # n -> creates started before it ran
    configs: list[McpServerConfig] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    refresh_failures: int = 0
    agent_id: str = ""
    round: int = 0  # the churn's round (it goes on there after a crash)
    next_n: dict[int, int] = attrs.Factory(dict)  # caller -> the next n it calls
    live: bool = False  # False: certainly no server record (after a delete, before a create)
    creates: int = 0  # creates started so far: a call's window without one saw no record
    # with ``rotate``: the secret's version, the version certainly in force (None: an update,
    # a refresh or a delete may be under way), a counter of those windows, and per call
    # n -> (the version it was sent for, window at start, window at end, outcome)
    version: int = 0
    settled: int | None = None
    window: int = 0
    sent_for: dict[int, tuple[int, int, int, str]] = attrs.Factory(dict)
    finished: bool = False  # the workload is done: the simulation's end stops the servers
    rotating: bool = False  # ``rotate`` is on
    static_configs: list[McpServerConfig] = attrs.Factory(list)  # with ``rotate``
    static_calls: list[str] = attrs.Factory(list)
    ran_version: dict[int, int] = attrs.Factory(dict)  # n -> the version of the process
    http: bool = False  # ``http``: the ticker is a Streamable HTTP server (auth header)
    # n -> virtual seconds a call waited before it failed as timed out (not at start-up)
    timed_out: dict[int, float] = attrs.Factory(dict)


def ticker(log: Log) -> SimMcpServer:
    def tick(args: dict[str, Any]) -> str:
        log.executed.append(int(args["n"]))
        log.ran_in.setdefault(int(args["n"]), log.creates)
        return f"tick {args['n']}"

    tools = [
        {"name": "tick", "description": "Tick once.", "input_schema": SCHEMA, "response": tick}
    ]
    return SimMcpServer("ticker", tools, latency=(0.01, 0.2), start_latency=(0.01, 0.1))


def versioned_ticker(log: Log, version: int) -> SimMcpServer:
    """With ``rotate``: the server as started with version ``version``'s secret."""

    def tick(args: dict[str, Any]) -> str:
        log.executed.append(int(args["n"]))
        log.ran_in.setdefault(int(args["n"]), log.creates)
        log.ran_version.setdefault(int(args["n"]), version)
        return f"tick {args['n']} v{version}"

    schema = versioned_schema(version)
    tools = [
        {"name": "tick", "description": "Tick once.", "input_schema": schema, "response": tick}
    ]
    return SimMcpServer("ticker", tools, latency=(0.01, 0.2), start_latency=(0.01, 0.1))


@attrs.define
class Recorder:
    server: SimMcpServer
    log: Log
    versions: dict[int, SimMcpServer] | None = None  # with ``rotate``: by secret version
    faults: Any = None  # with ``rotate``: the simulation's faults (what fired)

    def __call__(self, config: McpServerConfig) -> AbstractAsyncContextManager[Any]:
        self.log.configs.append(config)
        if self.versions is None:
            return sim_mcp_transport(self.server)(config)
        found = [v for v in range(self.log.version + 1) if secret(v) == config.env_dict.get("T")]
        version = found[0] if found else 0
        if version not in self.versions:
            self.versions[version] = versioned_ticker(self.log, version)
        return self._watched(self.versions[version], version, config)

    def _failures(self) -> int:
        fired = self.faults.fired
        return int(fired["mcp.server_crash"] + fired["mcp.slow_start"])

    @asynccontextmanager
    async def _watched(
        self, server: SimMcpServer, version: int, config: McpServerConfig
    ) -> AsyncIterator[Any]:
        """A process of ``server``; the client must keep it while it is healthy and the
        record unchanged: its end while its version is settled, with no crash or slow start
        fired since it started, is a problem."""
        log, failures = self.log, self._failures()
        try:
            async with sim_mcp_transport(server)(config) as streams:
                yield streams
        finally:
            if not log.finished and log.settled == version and self._failures() == failures:
                log.problems.append(
                    f"the client stopped a healthy process of version {version} while its "
                    "record was unchanged (no crash, no slow start, no update or delete)"
                )


def static_servers(log: Log) -> list[SimMcpServer]:
    """With ``rotate``: the static servers of :data:`STATIC_CONFIG` (each has ``ping``)."""

    def answer(name: str) -> Any:
        def ping(args: dict[str, Any]) -> str:
            log.static_calls.append(name)
            return f"{name} ok"

        return ping

    schema = {"type": "object", "properties": {}}
    return [
        SimMcpServer(
            name,
            [
                {
                    "name": "ping",
                    "description": "Ping.",
                    "input_schema": schema,
                    "response": answer(name),
                }
            ],
            latency=(0.01, 0.05),
            start_latency=(0.01, 0.05),
        )
        for name in sorted(STATIC_EXPECTED)
    ]


@attrs.define
class StaticRecorder:
    """With ``rotate``: starts the static servers, noting the config each start got."""

    servers: list[SimMcpServer]
    log: Log

    def __call__(self, config: McpServerConfig) -> AbstractAsyncContextManager[Any]:
        self.log.static_configs.append(config)
        return sim_mcp_transport(*self.servers)(config)


async def churn(
    service: Any, log: Log, rounds: int, rng: Any, rotate: bool = False, hold: float = 0.0
) -> None:
    """The rounds of create, update, refresh and delete; after a crash (several nodes) it
    goes on with the round it was in, reusing the record an interrupted create stored."""
    if not log.agent_id:
        log.agent_id = (await service.create_agent(CreateAgent(name="ticking"))).agent.id
    agent_id = log.agent_id
    while log.round < rounds:
        number = log.round
        if rotate:  # the static servers answer beside the managed one
            for name in sorted(STATIC_EXPECTED):
                with contextlib.suppress(KelpieError):
                    await service.mcp_servers.call_tool(name, "ping", {})
        log.live = True  # from before the create starts: "no record" must be certain
        log.creates += 1
        left = [r for r in await catalog.list_servers(service) if r.server_name == "ticker"]
        if left:
            record = left[0]
        elif log.http:  # a Streamable HTTP server, its secret in the auth header
            record = await catalog.create_server(
                service,
                "ticker",
                "streamable_http",
                {
                    "server_url": URL,
                    "auth_header": AUTH_HEADER,
                    "auth_token": secret(log.version),
                    "custom_headers": dict(CUSTOM_HEADERS),
                },
            )
        else:
            record = await catalog.create_server(
                service,
                "ticker",
                "stdio",
                {"command": "ticker", "args": [], "env": {"T": secret(log.version)}},
            )
        tools = await catalog.server_tool_list(service, record.id)
        for _ in range(3):  # the server may have crashed while create listed its tools
            if tools:
                break
            with contextlib.suppress(UnavailableError):
                await catalog.refresh_server(service, record.id)
            tools = await catalog.server_tool_list(service, record.id)
        if tools:
            await service.attach_tool(agent_id, tools[0].id)
        await trio.sleep(rng.uniform(0.2, 1.0))
        if rotate:  # the secret alone changes: the next call everywhere must use it
            log.settled, log.window = None, log.window + 1
            log.version += 1
            changes: dict[str, Any] = {"env": {"T": secret(log.version)}}
        elif log.http:  # the secrets sent back masked, as a client shows them
            masked = {k: "****" for k in CUSTOM_HEADERS}
            changes = {"server_url": f"{URL}?round={number}", "auth_token": "****"}
            changes["custom_headers"] = masked
        else:
            changes = {"args": [f"--round={number}"], "env": {"T": "****"}}
        await catalog.update_server(service, record.id, None, changes)
        try:
            await catalog.refresh_server(service, record.id)
            if rotate:
                log.settled, log.window = log.version, log.window + 1
                await check_registered(service, log, record.id, number)
        except UnavailableError:  # the server crashed or did not start: a 503, as users see
            log.refresh_failures += 1
        attached = [t.id for t in await service.list_agent_tools(agent_id)]
        if tools and tools[0].id not in attached:
            log.problems.append(f"round {number}: refresh detached {tools[0].id} from the agent")
        await trio.sleep(rng.uniform(0.2, 1.0))
        if (rotate or hold) and number == rounds - 1:
            await trio.sleep(hold)  # the last version stays in force a while
        if rotate:
            log.settled, log.window = None, log.window + 1
        await catalog.delete_server(service, record.id)
        log.live = False  # only once the delete is done
        log.round += 1
        await trio.sleep(rng.uniform(0.1, 0.5))


async def check_registered(service: Any, log: Log, server_id: str, number: int) -> None:
    """With ``rotate``: once a refresh returned, the registered ``tick`` (what agents are
    offered, and what their calls are checked against) has the schema the server lists now,
    version ``log.version``'s (a refresh updates a changed tool in place, docs/mcp.md)."""
    with contextlib.suppress(KelpieError):  # a read that fails judges nothing
        listed = await catalog.server_tool_list(service, server_id)
        want = versioned_schema(log.version)
        for spec in listed:
            shown = dict(spec.json_schema).get("parameters")
            if spec.name == "tick" and shown != want:
                log.problems.append(
                    f"round {number}: after the refresh, the registered tick's schema is "
                    f"{shown}, not version {log.version}'s {want}"
                )


async def caller(service: Any, log: Log, i: int, first: int, count: int, rng: Any) -> None:
    """Call ``tick`` for ``n`` in ``first..first+count``; after a crash, from the next ``n``
    (a call a crash interrupted is not sent again: that would run it twice)."""
    while log.next_n.setdefault(i, first) < first + count:
        n = log.next_n[i]
        log.next_n[i] = n + 1
        live, creates = log.live, log.creates
        settled, window = log.settled, log.window
        args: dict[str, Any] = {"n": n} if settled is None else {"n": n, "v": settled}
        started = trio.current_time()
        try:
            result = await service.mcp_servers.call_tool("ticker", "tick", args)
            outcome = "success" if not result.is_error else "error"
        except KelpieError as error:
            outcome = f"error: {type(error).__name__}"
            if isinstance(error, McpTimeoutError) and not isinstance(error, McpStartupTimeoutError):
                log.timed_out[n] = trio.current_time() - started
            if isinstance(error, McpConnectionError):  # crashed: start it again, as the
                with contextlib.suppress(KelpieError):  # executor does (not retrying n)
                    await service.mcp_servers.reconnect("ticker")
        log.outcomes[n] = (outcome, live, creates, log.creates)
        if settled is not None:
            log.sent_for[n] = (settled, window, log.window, outcome)
        await trio.sleep(rng.uniform(0.05, 0.4))


@workload(
    params={
        "rounds": 4,
        "callers": 3,
        "calls": 12,
        "rotate": False,
        "hold": 0.0,
        "http": False,
        "catalog": False,
        "catalog_changes": False,
        "catalog_errors": False,
    },
    sizes=("callers", "calls"),
    bounds={"rounds": (1, 50), "callers": (1, 20), "calls": (1, 200)},
)
async def agent_mcp_servers(ctx: WorkloadContext) -> None:
    """Churn the managed MCP server while callers call its tool; see the module docstring."""
    log = Log()
    ctx.state["log"] = log
    params = ctx.params
    nodes = list(ctx.topology.nodes)
    db = ctx.sim.add_node(ctx.topology.database) if ctx.topology.database else None
    server = ticker(log)
    rotate = bool(params["rotate"])
    log.rotating = rotate
    log.http = bool(params["http"])
    if rotate and log.http:
        raise UsageError("workload.params.http: not with rotate (its versions are env secrets)")
    versions: dict[int, SimMcpServer] | None = {} if rotate else None
    ended: dict[str, bool] = {}
    done = trio.Event()
    # with ``catalog`` (svcU, session 24): the first node also walks the catalog of managed
    # servers (``_mcp_catalog_walk``), its own servers reached by their commands
    walk: CatalogLog | None = CatalogLog() if params["catalog"] else None
    # with ``catalog_errors`` (svcW, session 26): the walk's tools refuse every third run
    if params["catalog_errors"]:
        if walk is None:
            raise UsageError("workload.params.catalog_errors: needs catalog")
        walk.refuse_every = 3
    if walk is not None:
        ctx.state["catalog"] = walk
    walked = [False]
    # with ``catalog_changes`` (apiV, session 25): the walk servers' listings change while
    # they run (``_mcp_catalog_walk.CHANGES``); the walk reaches the node's current ones
    changes = bool(params["catalog_changes"])
    if changes and walk is None:
        raise UsageError("workload.params.catalog_changes: needs catalog")
    walk_servers: list[dict[str, SimMcpServer]] = []

    async def node_main(node: kelpie_dst.Node) -> None:
        rng = ctx.rng("mcp_servers")
        static: McpClient | None = None
        async with contextlib.AsyncExitStack() as stack:
            if rotate:
                configs = parse_mcp_config(STATIC_CONFIG)
                transport = StaticRecorder(static_servers(log), log)
                static = await stack.enter_async_context(McpClient(configs, transport=transport))
            await serve(node, rng, static)

    async def serve(node: kelpie_dst.Node, rng: Any, static: McpClient | None) -> None:
        transport: Any = Recorder(server, log, versions, ctx.sim.faults)
        if walk is not None:
            walk_servers.append(catalog_servers(walk))
            transport = Routed(transport, walk_servers[-1])
        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(HelpfulPolicy(), timing=LlmTiming()),
            mcp=static,
            mcp_transport=transport,
            observer=kelpie_dst.log,
        ) as service:
            async with trio.open_nursery() as nursery:
                if node.name == nodes[0]:
                    nursery.start_soon(
                        churn, service, log, params["rounds"], rng, rotate, float(params["hold"])
                    )
                if walk is not None and node.name == nodes[0] and not walked[0]:
                    walked[0] = True
                    nursery.start_soon(
                        walk_catalog,
                        service,
                        walk,
                        ctx.rng("mcp_catalog"),
                        ctx.sim.faults,
                        (lambda: walk_servers[-1]) if changes else None,
                    )
                calls = params["calls"]
                for i in range(params["callers"]):
                    if nodes[i % len(nodes)] == node.name:
                        nursery.start_soon(caller, service, log, i, i * calls, calls, rng)
            ended[node.name] = True
            if len(ended) == len(nodes):
                done.set()
            await trio.sleep_forever()  # keep serving: another node may still use it

    for name in nodes:
        ctx.sim.add_node(name, node_main)
    await done.wait()
    log.finished = True
    ctx.metric("mcp.calls", len(log.outcomes))
    ctx.metric("mcp.executed", len(log.executed))
    ctx.metric("mcp.refresh_failures", log.refresh_failures)
    if walk is not None:
        ctx.metric("mcp.catalog.runs", walk.runs)
        ctx.metric("mcp.catalog.refusals", walk.refusals)
        ctx.metric("mcp.catalog.problems", len(walk.problems))
        if walk.refuse_every:
            ctx.metric("mcp.catalog.refused", len(walk.refused))
    if rotate:
        settled = [n for n, (_, start, end, _) in log.sent_for.items() if start == end]
        ctx.metric("mcp.rotation.settled_calls", len(settled))
        ctx.metric("mcp.rotation.versions", log.version)
        ctx.metric("mcp.rotation.static_starts", len(log.static_configs))
        ctx.metric("mcp.rotation.static_calls", len(log.static_calls))


def check(log: Log) -> list[str]:
    """The oracle's findings (empty: all is well)."""
    problems = list(log.problems)
    counts: dict[int, int] = {}
    for n in log.executed:
        counts[n] = counts.get(n, 0) + 1
    for n, count in sorted(counts.items()):
        if count > 1:
            problems.append(f"call {n} executed {count} times")
    for n, (outcome, live, started, ended) in sorted(log.outcomes.items()):
        ran = counts.get(n, 0)
        if outcome == "success" and ran != 1:
            problems.append(f"call {n} reported success but executed {ran} times")
        # no record when it started, and none created before it ran (or, for its result,
        # before it ended): the server was deleted, and the call must not have reached it
        if not live and ran and log.ran_in.get(n) == started:
            problems.append(f"call {n} started with no server record, yet executed")
        if not live and outcome == "success" and ended == started:
            problems.append(f"call {n} started with no server record, yet succeeded")
    secrets = {secret(v) for v in range(log.version + 1)}
    for config in log.configs:
        if log.http:  # every connection carries the record's URL, auth header and headers
            headers = dict(config.headers)
            if (
                config.url is None
                or not config.url.startswith(URL)
                or headers.get(AUTH_HEADER) not in secrets
                or any(headers.get(k) != v for k, v in CUSTOM_HEADERS.items())
            ):
                shown = sorted(headers)
                problems.append(
                    f"server connected to {config.url!r} with headers {shown} and not its "
                    f"record's secrets (the {AUTH_HEADER} token, {sorted(CUSTOM_HEADERS)})"
                )
        elif config.env_dict.get("T") not in secrets:
            problems.append(f"server started without its secret (args {list(config.args)})")
    return problems + check_rotation(log) + check_static(log)


def check_static(log: Log) -> list[str]:
    """With ``rotate``: every start of a static server got what :data:`STATIC_CONFIG` says
    (command, arguments in order, environment, directory, timeouts, defaults where absent);
    each was started."""
    if not log.rotating:
        return []  # no static servers
    problems = []
    for config in log.static_configs:
        want = STATIC_EXPECTED.get(config.name)
        got = (
            config.command,
            tuple(config.args),
            config.env_dict,
            config.cwd,
            float(config.startup_timeout),
            float(config.call_timeout),
        )
        if want is None or got != want:
            problems.append(
                f"static mcp server {config.name!r} started with {got!r}, but its "
                f"configuration says {want!r}"
            )
    started = {c.name for c in log.static_configs}
    for name in sorted(set(STATIC_EXPECTED) - started):
        problems.append(f"static mcp server {name!r} was never started")
    return problems


def check_rotation(log: Log) -> list[str]:
    """With ``rotate``: a call sent, from start to end, while version ``v`` was certainly in
    force (its update and refresh returned, its delete not started) ran, if at all, on a
    process started with ``v``'s secret, and was not refused for arguments valid in ``v``."""
    problems = []
    for n, (version, start, end, outcome) in sorted(log.sent_for.items()):
        if start != end:
            continue  # an update, refresh or delete began meanwhile
        ran = log.ran_version.get(n)
        if ran is not None and ran != version:
            problems.append(
                f"call {n}, sent after the update to secret version {version} took effect, "
                f"ran on a process started with version {ran}'s secret"
            )
        if outcome == "error: McpArgumentError":
            problems.append(
                f"call {n} was refused for its arguments, which are valid for the tool as "
                f"version {version} of the server lists it (the update and refresh returned)"
            )
    return problems


# The ticker is created without timeouts: the documented defaults apply (docs/mcp.md).
CALL_TIMEOUT, STARTUP_TIMEOUT = STATIC_EXPECTED["atlas"][4:][::-1]


def check_timeouts(log: Log) -> list[str]:
    """A call that failed as timed out waited its server's ``call_timeout``: not less (the
    server had that long to answer), and not more than that plus one start-up of the server
    (a call may first have to start it) and a second."""
    problems = []
    for n, waited in sorted(log.timed_out.items()):
        # (1e-6: the deadline is the start plus the timeout, in floating point)
        if not CALL_TIMEOUT - 1e-6 <= waited <= CALL_TIMEOUT + STARTUP_TIMEOUT + 1.0:
            problems.append(
                f"call {n} timed out after {waited:.3f}s; the server's call_timeout is "
                f"{CALL_TIMEOUT:g}s (start-up {STARTUP_TIMEOUT:g}s)"
            )
    return problems


@invariant
def mcp_calls_time_out_on_time(ctx: WorkloadContext) -> None:
    """Managed MCP servers: a tool call without an explicit timeout is given up after its
    server's configured ``call_timeout`` (:func:`check_timeouts`)."""
    problems = check_timeouts(ctx.state["log"])
    assert not problems, "; ".join(problems[:5])


@invariant
def mcp_calls_exactly_once(ctx: WorkloadContext) -> None:
    """Managed MCP servers under churn: see :func:`check`."""
    problems = check(ctx.state["log"])
    assert not problems, "; ".join(problems[:5])


@invariant
def mcp_catalog_consistent(ctx: WorkloadContext) -> None:
    """With ``catalog``: a server answers only for its own tools, a refused request changes
    nothing, what a create or refresh returned is in force, a success carries the server's
    answer, no tool outlives or mislabels its server (``_mcp_catalog_walk``)."""
    walk = ctx.state.get("catalog")
    problems = check_catalog(walk) if walk is not None else []
    assert not problems, "; ".join(problems[:5])
