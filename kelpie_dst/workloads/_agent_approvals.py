"""Tool approvals spread across crashes (issue #18, "approvals spread across crashes").

Server nodes share one database host and crash (and restart). Agents have the ``pay`` tool
of an MCP server (a ``SimMcpServer``: the simulated external service, which records every
execution) and ``agents.tools.update_approval`` makes it require approval. For each request
``pay K`` a client asks (the run must stop with ``requires_approval`` and one approval request
for ``pay(key=K)``), then answers through ``messages.create`` with an approval or a denial
(sometimes without a reason), each step on whichever node a client picked, so a crash or a
handoff often falls between the request and its answer; every step is retried with the same
``otid`` until acknowledged. Sometimes a client first sends an approval for an unknown call,
and after an answer it replays that answer under a new ``otid``: both must be refused.

The oracle (``_agent_approval_checks``): an approved call's effect happens (at least one
execution, all before its answer was acknowledged), a denied call never runs, nothing runs
before its answer was sent, every run ends with the right stop reason and result, and an
unknown or stale approval is refused.
"""

from __future__ import annotations

import json
from typing import Any

import trio

import kelpie_dst
from kelpie_agent.agent import (
    ApprovalDecision,
    ApprovalRequestMessage,
    CreateAgent,
    InputMessage,
    ToolStore,
)
from kelpie_agent.api import create_app
from kelpie_agent.errors import KelpieError
from kelpie_agent.mcp import McpClient, McpServerConfig
from kelpie_agent.service import AgentService, InvalidError, ServiceOptions, open_agent_node

from .._nodes import Node
from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimKV, SimLlmClient, open_kv, sim_ports
from ..shims._mcp import SimMcpServer, sim_mcp_transport
from ._agent_approval_checks import (
    SCHEMA,
    ApprovalLog,
    ApprovalPolicy,
    Request,
    check,
    paired,
)
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._approval_wire import (
    after_answer,
    before_answer,
    returns_of,
    wire_answer,
    wire_probes,
)

__all__ = ["agent_approvals", "approvals_exactly_as_answered"]

SERVICE = ServiceOptions(request_timeout=20.0, scheduler=False)  # no schedules here (Dsched-5)


def vault(log: ApprovalLog) -> SimMcpServer:
    """The external service: ``pay`` (it will require approval) and ``note`` (it will not)
    record every execution."""

    def pay(args: dict[str, Any]) -> str:
        key = str(args.get("key", ""))
        log.executed.append((key, trio.current_time()))
        return f"paid {key}"

    def note(args: dict[str, Any]) -> str:
        key = str(args.get("key", ""))
        log.executed.append((f"note:{key}", trio.current_time()))
        return f"noted {key}"

    tools = [
        {"name": "pay", "description": "Pay.", "input_schema": SCHEMA, "response": pay},
        {"name": "note", "description": "Note.", "input_schema": SCHEMA, "response": note},
    ]
    return SimMcpServer("vault", tools, latency=(0.01, 0.2))


async def _ask(service: AgentService, log: ApprovalLog, req: Request) -> None:
    message = InputMessage("user", f"pay {req.key}", otid=f"ask-{req.key}")
    turn = await service.send_message(req.agent_id, [message])
    asks = [m for m in turn.messages if isinstance(m, ApprovalRequestMessage)]
    if turn.stop_reason != "requires_approval" or len(asks) != 1:
        log.problems.append(
            f"{req.key}: the request ended {turn.stop_reason} with {len(asks)} approval requests"
        )
        req.phase = "done"
        return
    call = asks[0].tool_call
    if json.loads(call.arguments).get("key") != req.key:
        log.problems.append(f"{req.key}: the approval request is for {call.arguments}")
    req.call_id = call.tool_call_id
    req.request_id = asks[0].id
    req.phase = "answer"


async def _probe_wire(app: Any, log: ApprovalLog, req: Request, probes: list[Any]) -> None:
    refused, problems = await wire_probes(app, req.agent_id, probes)
    log.refusals += refused
    log.problems.extend(f"{req.key}: {p}" for p in problems)


async def _answer(
    service: AgentService,
    log: ApprovalLog,
    req: Request,
    rng: Any,
    app: Any = None,
    answers: Any = None,
) -> None:
    if req.probe and not req.probed:  # an approval for a call that is not waiting
        bogus = ApprovalDecision(f"toolu_bogus_{req.key}", True)
        await _refused(service, log, req, [bogus], f"bogus-{req.key}", "an unknown call")
        if app is not None:  # the same, as letta-client sends it, in both forms
            await _probe_wire(app, log, req, before_answer(req.agent_id, req.key))
        req.probed = True
    reason = None if req.approve or rng.random() < 0.5 else f"no, not {req.key}"
    decision = ApprovalDecision(req.call_id, req.approve, reason)
    message = InputMessage("approval", "", otid=f"answer-{req.key}", approvals=(decision,))
    if log.legacy > 0 and rng.random() < log.legacy:
        # Letta's legacy answer: approve (and the reason as content) for the approval request
        # named by approval_request_id: the request message's id, as Letta's clients send it,
        # or (every third key) the call's id, which Kelpie also accepts (docs/http-api.md)
        named = req.call_id if sum(map(ord, req.key)) % 3 == 0 else req.request_id
        message = InputMessage(
            "approval",
            reason or "",
            otid=f"answer-{req.key}",
            approve=req.approve,
            approval_request_id=named,
        )
    if req.sent_at is None:
        req.sent_at = trio.current_time()
    try:
        if answers is not None:  # as letta-client sends it, through the node's REST app
            stop, returned = await wire_answer(answers, req.agent_id, message)
        else:
            turn = await service.send_message(req.agent_id, [message])
            stop, returned = turn.stop_reason, returns_of(turn.messages)
    except InvalidError as error:  # the answer to the call that waits (or its retry): never
        log.problems.append(f"{req.key}: the answer was refused: {error}")
        req.phase = "done"
        return
    req.acked_at = trio.current_time()
    req.phase = "done"
    pays = [m for m in returned if m.name == log.tool]
    if stop != "end_turn":
        log.problems.append(f"{req.key}: the answered run ended {stop}")
    if len(pays) != 1:
        log.problems.append(f"{req.key}: the answered run has {len(pays)} results of the call")
    elif req.approve and pays[0].status != "success":
        # the tool may fail (an MCP timeout or crash): an error, never a denial
        req.ran_ok = False
        if "denied" in pays[0].tool_return:
            log.problems.append(f"{req.key}: approved, but the call returned {pays[0].tool_return}")
    elif req.approve and f"paid {req.key}" not in pays[0].tool_return:
        log.problems.append(f"{req.key}: approved, but the call returned {pays[0].tool_return}")
    elif not req.approve and (pays[0].status != "error" or "denied" not in pays[0].tool_return):
        log.problems.append(f"{req.key}: denied, but the call returned {pays[0].tool_return}")
    notes = [m for m in returned if m.name == log.note]
    if len(notes) != (1 if paired(req.key) else 0):
        log.problems.append(f"{req.key}: the answered run has {len(notes)} note results")
    if any(n.status != "success" for n in notes):
        req.note_ok = False  # the tool failed (an MCP timeout or crash)
    if req.probe:  # the same answer again, as a new request: nothing awaits it now
        await _refused(service, log, req, [decision], f"stale-{req.key}", "a stale call")
        if app is not None and req.request_id:
            await _probe_wire(app, log, req, after_answer(req.key, req.request_id))


async def _refused(
    service: AgentService,
    log: ApprovalLog,
    req: Request,
    decisions: list[ApprovalDecision],
    otid: str,
    what: str,
) -> None:
    message = InputMessage("approval", "", otid=otid, approvals=tuple(decisions))
    try:
        await service.send_message(req.agent_id, [message])
    except InvalidError:
        log.refusals += 1
        return
    log.problems.append(f"{req.key}: an approval for {what} was accepted")


async def _client(
    service: AgentService,
    node: Node,
    log: ApprovalLog,
    rng: Any,
    app: Any = None,
    answers: Any = None,
) -> None:
    while True:
        req = log.take(node.name)
        if req is None:
            await trio.sleep(0.3)
            continue
        try:
            if req.phase == "ask":
                await _ask(service, log, req)
            else:
                await _answer(service, log, req, rng, app, answers)
        except KelpieError as error:  # retried later, on any node, with the same otid
            log.failures.append(f"{req.key} {req.phase}: {type(error).__name__}")
        log.release(node.name)
        await trio.sleep(rng.uniform(0.05, 0.5))


async def _setup(
    service: AgentService, log: ApprovalLog, tool_ids: tuple[str, str], agents: int
) -> None:
    while len(log.agents) < agents:
        try:
            agent = (
                await service.create_agent(
                    CreateAgent(name=f"payer-{len(log.agents)}", tool_ids=tool_ids)
                )
            ).agent
            await service.set_tool_approval(agent.id, log.tool, True)
            log.agents.append(agent.id)
        except KelpieError:
            await trio.sleep(0.5)


@workload(
    params={
        "agents": 3,
        "requests": 4,
        "probe_fraction": 0.3,
        "legacy_fraction": 0.0,
        "wire_probes": False,
        "wire_answers": False,
    },
    sizes=("agents", "requests"),
    bounds={
        "agents": (1, 20),
        "requests": (1, 50),
        "probe_fraction": (0, 1),
        "legacy_fraction": (0, 1),
    },
)
async def agent_approvals(ctx: WorkloadContext) -> None:
    """Approvals and denials across crashes; see the module docstring."""
    db = ctx.sim.add_node(ctx.topology.database or "db")
    log = ApprovalLog(legacy=float(ctx.params["legacy_fraction"]))
    wire = bool(ctx.params["wire_probes"])
    wire_answers = bool(ctx.params["wire_answers"])
    ctx.state["approvals"] = log
    server = vault(log)
    main = ctx.sim.current_node()
    assert main is not None
    store = ToolStore(SimKV(open_kv(main, host=db).store), sim_ports(main))
    spec = await store.add_mcp_tool("vault", "pay", "Pay.", SCHEMA)  # an operator's setup
    note = await store.add_mcp_tool("vault", "note", "Note.", SCHEMA)
    log.tool, log.note = spec.name, note.name
    ready = trio.Event()

    def serve(admin: bool = False) -> Any:
        async def node_main(node: Node) -> None:
            log.release(node.name)  # its crashed incarnation's step is retried
            config = McpServerConfig("vault", "simulated", startup_timeout=10, call_timeout=10)
            async with (
                McpClient([config], transport=sim_mcp_transport(server)) as mcp,
                open_agent_node(
                    open_kv(node, host=db),
                    sim_ports(node),
                    node_id=node.name,
                    llm=SimLlmClient(ApprovalPolicy(spec.name, note.name), timing=LlmTiming()),
                    mcp=mcp,
                    options=SERVICE,
                    observer=kelpie_dst.log,
                    **coherence_options(ctx, db),
                ) as service,
            ):
                if admin:
                    await _setup(service, log, (spec.id, note.id), int(ctx.params["agents"]))
                    ready.set()
                    return
                await ready.wait()
                app = create_app(service) if wire or wire_answers else None
                await _client(
                    service,
                    node,
                    log,
                    ctx.rng(f"client/{node.name}"),
                    app if wire else None,
                    app if wire_answers else None,
                )

        return node_main

    ctx.sim.add_node("admin", serve(admin=True))
    await ready.wait()
    plan = ctx.rng("approvals/plan")
    for i, agent_id in enumerate(log.agents):
        for j in range(int(ctx.params["requests"])):
            approve = plan.random() < 0.6
            probe = plan.random() < float(ctx.params["probe_fraction"])
            log.requests.append(Request(f"a{i}r{j}", agent_id, approve, probe))
    for name in ctx.topology.nodes:
        ctx.sim.add_node(name, serve())
    while not log.finished():
        await trio.sleep(0.5)
    ctx.metric("approvals.requests", len(log.requests))
    ctx.metric("approvals.executed", len(log.executed))
    ctx.metric("approvals.refusals", log.refusals)
    ctx.metric("approvals.moved", log.moved())
    ctx.metric("approvals.failures", len(log.failures))


@invariant
def approvals_exactly_as_answered(ctx: WorkloadContext) -> None:
    """Approved calls take effect, denied ones never run, nothing runs before its answer,
    unknown and stale approvals are refused; see ``_agent_approval_checks``."""
    problems = check(ctx.state["approvals"])
    assert not problems, "; ".join(problems[:5])
