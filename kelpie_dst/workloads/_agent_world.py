"""The agent workload's world: server nodes over one shared database host, with a simulated
LLM, sandboxes and MCP servers, and a journal of every commit to the database and every
dispatcher observer event (for the single-activation checker).

With ``via="http"`` each server node runs the whole production stack, unmodified: an
:class:`~kelpie_agent.service.AgentService` node (``open_agent_node``), the Letta-compatible
app (``create_app``) and Kelpie's HTTP server on port :data:`PORT` of the simulated network.
With ``via="direct"`` it runs a bare :class:`~kelpie_agent.actors.Dispatcher` of
:class:`~kelpie_agent.agent.AgentActor` s that the clients call in-process.

The journal is instrumentation, not a mock: :class:`RecordingKV` is the node's ordinary
:class:`~kelpie_dst.shims.FaultyKV` whose transactions also note the owner records they read
(the lease fence) and, at the moment a commit applies, what it wrote.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import msgpack
import trio

import kelpie_dst
from kelpie_agent.actors import Dispatcher, DispatcherOptions
from kelpie_agent.agent import AgentActor, AgentEnv, LoopConfig, ToolStore
from kelpie_agent.api import create_app
from kelpie_agent.http import AccessRecord, HttpServer, ServerOptions
from kelpie_agent.mcp import McpClient, McpServerConfig
from kelpie_agent.service import AgentService, ServiceOptions, open_agent_node
from kelpie_agent.storage._txn import Write

from .._nodes import Node
from .._sim import Simulation
from ..shims import (
    FaultyKV,
    StreamShape,
    open_direct_kv,
    open_kv,
    open_sandbox,
    sim_ports,
)
from ..shims._mcp import SimMcpServer, sim_mcp_transport
from ..shims._storage import SimKVStore, SimTransaction
from ._agent_checks import Commit, Execution, Fence, Observed, Owner, agent_of_key
from ._agent_coherence import CoherenceAudit, audited_service
from ._agent_drain import DrainLog, Drains
from ._agent_llm import ModelLink
from ._agent_moves import EFFECT_SERVICE
from ._agent_oracles import Ledger, PromptAuditor, Sent
from ._agent_policy import CUSTOM_TOOL_SOURCE, MCP_SCHEMA, workload_policy
from ._agent_recovery import RunWrite, run_write
from ._agent_server_log import ServerLog
from ._agent_steps import StepCommits
from ._lease_audit import audit_store

__all__ = ["LOOP", "OPTIONS", "PORT", "Journal", "RecordingKV", "World"]

PORT = 8283
"""The HTTP port of every server node (``via="http"``), Letta's default."""

OWNER_PREFIX = b"actors/owner/"
OPTIONS = DispatcherOptions(
    idle_timeout=4.0,
    lease_duration=6.0,
    renew_every=1.5,
    lease_margin=2.5,
    acquire_timeout=30.0,
    poll_interval=0.5,
    shutdown_timeout=2.0,
)
"""Short leases and idle timeouts, so agents move and reactivate often in a short run."""
LOOP = LoopConfig(
    llm_timeout=30.0,
    llm_backoff=0.5,
    llm_backoff_max=8.0,
    tool_timeout=20.0,
    sink_timeout=10.0,
)
SERVICE = ServiceOptions(request_timeout=20.0, scheduler=False)
"""The service gives up (503) well before a client's attempt times out, so clients move on.
No scheduler: these scenarios create no schedule, and its scans would shift every seed
(Dsched-5); ``agent_schedules`` runs it under the same faults."""
SERVER = ServerOptions(header_timeout=10.0, body_timeout=10.0, keep_alive_timeout=5.0)


def _record(raw: bytes) -> dict[str, Any]:
    try:
        value = msgpack.unpackb(raw, raw=False)
    except Exception:
        return {}
    return value if isinstance(value, dict) else {}


def _owner(raw: bytes | None) -> Owner | None:
    if raw is None:
        return None
    try:
        d = msgpack.unpackb(raw, raw=False)
    except Exception:
        return None
    if not isinstance(d, dict):
        return None
    return Owner(d.get("node"), int(d.get("epoch", 0)), d.get("token"))


class Journal:
    """Commits to the shared database and observer events, in the order they happened, and
    the MCP tool calls the agents sent (positioned among them)."""

    def __init__(self, mcp_tools: Sequence[str] = ()) -> None:
        self.entries: list[Commit | Observed] = []
        self.executions: list[Execution] = []
        self.sent: list[Sent] = []  # the MCP calls with a request_id, as each send ended
        self.counts: dict[str, int] = {}
        self.returns: dict[str, tuple[int, str]] = {}  # tool call id -> (entry, status), first
        self._activations: dict[int, str] = {}
        self._tasks: list[trio.lowlevel.Task] = []
        names = b"|".join(re.escape(t.encode()) for t in mcp_tools)
        self._results = re.compile(b"(?:" + names + rb"): tag-a\d+-m\d+ step \d+(?:\.\d+)?")
        self._any = bool(mcp_tools)
        self.steps = StepCommits()  # steps written with their messages (_agent_steps)
        self.runs: list[RunWrite] = []  # every run record written (_agent_recovery)
        self.crashes: list[tuple[int, str]] = []  # (position, node): a node crashed there
        self.mcp_calls: list[McpCallOutcome] = []  # every static MCP call, as it ended
        self.internal_errors: list[str] = []  # every 500 an API app reported (no_internal_errors)

    def activation(self) -> str | None:
        """Which activation is committing: the nearest enclosing actor task (the dispatcher
        names each ``kelpie_agent.actor[<kind>/<id>]``), or None outside one."""
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        while task is not None:
            if task.name.startswith("kelpie_agent.actor["):
                key = id(task)
                if key not in self._activations:
                    self._activations[key] = f"{task.name}#{len(self._activations) + 1}"
                    self._tasks.append(task)  # kept alive, so the id is never reused
                return self._activations[key]
            nursery = task.parent_nursery
            task = nursery.parent_task if nursery is not None else None
        return None

    def crashed(self, node: Node) -> None:
        """A node crashed (a crash hook): its activations end here."""
        self.crashes.append((len(self.entries), node.name))

    def executed(self, tool: str, note: str) -> None:
        """An agent sent an MCP call for ``note`` (a tool step)."""
        self.executions.append(Execution(len(self.entries), tool, note))

    def commit(
        self,
        node: str,
        fences: Mapping[bytes, bytes | None],
        writes: Sequence[Write],
        incarnation: int = 0,
        writer: str | None = None,
    ) -> None:
        self.steps.observe(writes)
        for key, value in writes:
            if value is not None and key.startswith(b"run/"):
                at, now = len(self.entries), trio.current_time()
                found = run_write(at, now, node, key, _record(value))
                if found is not None:
                    self.runs.append(found)
        agent_writes = tuple(
            k for k in (key.decode("utf-8", "replace") for key, _ in writes) if agent_of_key(k)
        )
        owners = tuple(
            (key[len(OWNER_PREFIX) :].decode("utf-8", "replace"), _owner(value))
            for key, value in writes
            if key.startswith(OWNER_PREFIX)
        )
        if not agent_writes and not owners:
            return
        fenced = tuple(
            Fence(key[len(OWNER_PREFIX) :].decode("utf-8", "replace"), _owner(value))
            for key, value in fences.items()
        )
        results: list[str] = []
        if self._any:
            for _, value in writes:
                if value is not None:
                    results += (r.decode() for r in self._results.findall(value))
        for key, value in writes:
            if value is not None and key.startswith(b"msg/") and b"tool_return_message" in value:
                record = _record(value)
                call_id = record.get("tool_call_id")
                if record.get("_t") == "tool_return_message" and isinstance(call_id, str):
                    self.returns.setdefault(call_id, (len(self.entries), str(record.get("status"))))
        self.entries.append(
            Commit(
                trio.current_time(),
                node,
                agent_writes,
                owners,
                fenced,
                tuple(results),
                incarnation,
                writer,
            )
        )

    def observer(self, node: str) -> Callable[..., None]:
        def observe(kind: str, **fields: Any) -> None:
            epoch = fields.get("epoch")
            self.entries.append(
                Observed(
                    trio.current_time(),
                    node,
                    kind,
                    str(fields.get("actor", "")),
                    epoch if isinstance(epoch, int) else None,
                )
            )
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if kind in ("api.error", "api.stream_error") and fields.get("status") == 500:
                where = f"{fields.get('method', '')} {fields.get('path', '')}".strip()
                self.internal_errors.append(f"{node}: {where or 'a stream'}: {fields.get('error')}")
            kelpie_dst.log(kind, node=node, **fields)

        return observe


class RecordingTransaction(SimTransaction):
    def __init__(self, kv: RecordingKV) -> None:
        super().__init__(kv)
        self._recorder = kv
        self._fences: dict[bytes, bytes | None] = {}

    async def _read(self, key: bytes) -> bytes | None:
        value = await super()._read(key)
        if key.startswith(OWNER_PREFIX):
            self._fences[key] = value
        return value

    def _validate(self, writes: list[Write]) -> None:
        super()._validate(writes)
        # SimTransaction applies the writes right after this returns, with no await between.
        node = self._recorder.node
        journal = self._recorder.journal
        journal.commit(node.name, self._fences, writes, node.incarnation, journal.activation())


class RecordingKV(FaultyKV):
    """A node's FaultyKV on the database host, journaling what it commits."""

    def __init__(self, sim: Simulation, node: Node, host: Node, journal: Journal) -> None:
        super().__init__(sim, node, open_kv(node, host=host).store, host)
        self.journal = journal

    def transaction(self) -> RecordingTransaction:
        self._check_open()
        return RecordingTransaction(self)

    async def _before_op(self, op: str, key: bytes | None) -> None:
        await super()._before_op(op, key)
        if op in ("set", "delete") and key is not None:  # applied right after, unfenced
            self.journal.commit(self.node.name, {}, [(key, None)], self.node.incarnation)


@attrs.frozen
class McpCallOutcome:
    """One call of a static MCP tool by a node's client: when, and how it failed (the
    exception's type name; None if it answered)."""

    node: str
    server: str
    tool: str
    started: float
    ended: float
    error: str | None


class RecordingMcp:
    """The node's McpClient, noting in the journal each tool call the agent sends."""

    def __init__(self, client: McpClient, journal: Journal, node: str = "") -> None:
        self.client = client
        self.journal = journal
        self.node = node

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        args = arguments or {}
        key, activation = str(args.get("request_id", "")), self.journal.activation()
        self.journal.executed(tool, str(args.get("text", "")))
        started = trio.current_time()
        error: str | None = None
        try:
            return await self.client.call_tool(server, tool, arguments, timeout=timeout)
        except BaseException as failure:
            error = type(failure).__name__
            raise
        finally:
            self.journal.mcp_calls.append(
                McpCallOutcome(self.node, server, tool, started, trio.current_time(), error)
            )
            if key and activation is not None:
                ended = trio.current_time()
                # Any send that failed: check_resends judges it only if its effect happened
                # meanwhile (a lost reply, or a server that died after running it), whatever
                # the client called the failure, so no client's classification is trusted.
                failed = error is not None
                self.journal.sent.append(Sent(activation, key, tool, failed, started, ended))

    def status(self, server: str) -> str:
        return self.client.status(server)

    async def reconnect(self, server: str) -> None:
        await self.client.reconnect(server)


class World:
    """The server nodes, their dispatchers (the live incarnation's), the shared policy and
    tools. Server nodes boot on :meth:`start`; a restarted node gets a fresh dispatcher."""

    def __init__(
        self,
        sim: Simulation,
        *,
        nodes: Sequence[str],
        database: str,
        llm_policy: Mapping[str, Any],
        sandbox: bool,
        mcp: Sequence[tuple[str, Sequence[str]]],
        tools: Sequence[str],
        via: str = "direct",
        history_window: int = 0,
        storage_attempts: int = 0,
        llm_transport: str = "direct",
        escapes: bool = False,
        bare_sdk_nodes: int = 0,
        gateway_errors: float = 0.0,
        shapes: bool = False,
        server: ServerOptions = SERVER,
        api_key: str | None = None,
        ping_interval: float = 15.0,
    ) -> None:
        self.sim = sim
        self.via = via
        self.server = server  # the HTTP server's limits and timeouts (via http)
        self.api_key = api_key  # the API's key (via http; None: none)
        self.ping_interval = ping_interval  # seconds of silence before a stream pings
        loop = attrs.evolve(LOOP, history_window=history_window) if history_window else LOOP
        self.service = SERVICE
        if storage_attempts:  # the runtime's and the service's own storage reads alike
            loop = attrs.evolve(loop, storage_attempts=storage_attempts)
            self.service = attrs.evolve(SERVICE, storage_attempts=storage_attempts)
        self.loop = loop
        # The oracles at the model's and the external service's boundaries (_agent_oracles).
        self.auditor = PromptAuditor()
        self.server_log = ServerLog()  # what the HTTP servers reported as a problem
        self.ledger = Ledger(lambda: len(self.journal.entries))
        self.boot_hooks: list[Callable[[Node], None]] = []  # called when a node boots again
        self.node_names = tuple(nodes)
        self.policy = workload_policy(
            llm_policy,
            expect=self.auditor.expect,
            effect=self.ledger.register,
            escapes=escapes,
            shapes=shapes,
        )
        # stream_escapes: replies with escapes, streams cut anywhere (_engine.StreamShape)
        shape = StreamShape(escapes=True, cut_anywhere=True) if escapes else None
        bare = frozenset(nodes[:bare_sdk_nodes])
        self.model = ModelLink(
            sim, self.policy, self.auditor, llm_transport, shape, bare, gateway_errors
        )
        self.sandbox = sandbox
        self.wants = tuple(tools)
        self.mcp_tools = tuple(t for _, names in mcp for t in names)
        self.journal = Journal(self.mcp_tools)
        self.dispatchers: dict[str, Dispatcher] = {}  # via="direct": the live incarnation's
        self.services: dict[str, AgentService] = {}  # via="http": the live incarnation's
        self.db = sim.add_node(database)
        # the lease-record audit (leaseR; instrumentation only: no run changes)
        self.lease_audit = audit_store(sim, self.db)
        self.mcp_servers = [
            SimMcpServer(
                name,
                [
                    {
                        "name": t,
                        "description": f"Look {t} up.",
                        "input_schema": MCP_SCHEMA,
                        "response": _echo(t, self.ledger),
                    }
                    for t in names
                ],
                latency=(0.05, 0.3),
            )
            for name, names in mcp
        ]
        self.tool_ids: dict[str, str] = {}  # name -> id of the custom and MCP tools
        self.http_statuses: dict[str, int] = {}  # "2xx", "4xx", ...: what the servers answered
        self.coherence: CoherenceAudit | None = None  # set before start(): audited services
        self.drains: Drains | None = None  # set before start(): graceful stops (_agent_drain)
        self.dispatcher = OPTIONS  # set before start(): the nodes' leases (``lease_duration``)

    async def setup(self) -> None:
        """Start the model's API host if there is one, and register the custom tool and the
        MCP tools (an operator's provisioning: done on the database directly, before any
        fault can matter)."""
        await self.model.setup()
        main = self.sim.current_node()
        assert main is not None
        store = ToolStore(open_direct_kv(main, host=self.db), sim_ports(main))
        if "custom" in self.wants:
            spec = await store.upsert(CUSTOM_TOOL_SOURCE)
            self.tool_ids[spec.name] = spec.id
        if "mcp" in self.wants:
            for server in self.mcp_servers:
                for tool in server.tools.values():
                    mcp_spec = await store.add_mcp_tool(
                        server.name, tool.name, tool.description, MCP_SCHEMA
                    )
                    self.tool_ids[mcp_spec.name] = mcp_spec.id

    def start(self) -> None:
        for name in self.node_names:
            self.sim.add_node(name, self._server).crash_hooks.append(self.journal.crashed)

    def _access(self, record: AccessRecord) -> None:
        kelpie_dst.log("http.access", line=record.line())
        status = "none" if not record.status else f"{record.status // 100}xx"
        if record.status in (500, 503):  # a bug, and "could not reach the agent in time"
            status = str(record.status)
        self.http_statuses[status] = self.http_statuses.get(status, 0) + 1

    def store(self) -> SimKVStore:
        """The database host's store, read directly by the oracles (no faults, no node)."""
        return open_kv(self.db).store

    def _ledger(self, key: str, note: str) -> str:
        """The external service, as the sandbox's Python code sees it."""
        return self.ledger.apply(str(key), str(note), "sandbox")

    async def _server(self, node: Node) -> None:
        if node.incarnation > 1:
            for hook in self.boot_hooks:
                hook(node)
        # A graceful stop (_agent_drain) ends one production node; the next starts at once,
        # as a restarted process would, and is checked as after a restart.
        while await self._life(node):
            for hook in self.boot_hooks:
                hook(node)

    async def _life(self, node: Node) -> bool:
        """One production node; True once a graceful stop ended it."""
        from ._agent_sqlite import recording_sqlite_kv  # imports this module

        kv = recording_sqlite_kv(self.sim, node, self.db, self.journal) or RecordingKV(
            self.sim, node, self.db, self.journal
        )
        async with contextlib.AsyncExitStack() as stack:
            mcp = None
            if self.mcp_servers and "mcp" in self.wants:
                configs = [
                    McpServerConfig(s.name, "simulated", startup_timeout=10, call_timeout=10)
                    for s in self.mcp_servers
                ]
                client = McpClient(configs, transport=sim_mcp_transport(*self.mcp_servers))
                mcp = RecordingMcp(await stack.enter_async_context(client), self.journal, node.name)
            services = {EFFECT_SERVICE: self._ledger}
            factory = (
                (
                    lambda r: open_sandbox(
                        node, name="agent-tools", network=r.network, services=services
                    )
                )
                if self.sandbox
                else None
            )
            llm = await self.model.open(stack, node.name)
            observer = self.journal.observer(node.name)
            if self.lease_audit is not None:
                observer = self.lease_audit.observer(node.name, observer)
            if self.via == "http":
                service = await stack.enter_async_context(
                    open_agent_node(
                        kv,
                        sim_ports(node),
                        node_id=node.name,
                        llm=llm,
                        sandbox_factory=factory,
                        mcp=mcp,
                        loop_config=self.loop,
                        dispatcher_options=self.dispatcher,
                        options=self.service,
                        observer=observer,
                        service_class=(
                            audited_service(self.coherence)
                            if self.coherence is not None
                            else AgentService
                        ),
                    )
                )
                self.services[node.name] = service
                app = create_app(
                    service,
                    observer=observer,
                    api_key=self.api_key,
                    ping_interval=self.ping_interval,
                )
                logger: Any = self.server_log.node(node.name)
                if self.drains is not None:
                    logger = DrainLog(logger, self.drains)
                server = HttpServer(app, self.server, access_log=self._access, logger=logger)
                if self.drains is not None:
                    self.drains.serving(node, server)
                await server.serve("0.0.0.0", PORT)
                return True  # only a graceful stop returns (a crash cancels)
            env = AgentEnv(llm=llm, sandbox_factory=factory, mcp=mcp, config=self.loop)
            dispatcher = Dispatcher(
                kv,
                sim_ports(node),
                node_id=node.name,
                factories={"agent": lambda _: AgentActor(env)},
                options=self.dispatcher,
                observer=observer,
            )
            self.dispatchers[node.name] = dispatcher
            await dispatcher.run()
        return False


def _echo(tool: str, ledger: Ledger) -> Callable[[Mapping[str, Any]], str]:
    """An MCP tool of the workload: it records its text with the external service (keyed by
    the call's ``request_id``) and echoes it."""

    def respond(args: Mapping[str, Any]) -> str:
        key = args.get("request_id")
        if isinstance(key, str) and key:
            ledger.apply(key, str(args.get("text", "")), f"mcp:{tool}")
        return f"{tool}: {args.get('text', '')}"

    return respond
