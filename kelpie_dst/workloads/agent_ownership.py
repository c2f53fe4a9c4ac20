"""Children reached through a parent that does not own them (``agent_ownership``, ownR,
session 21).

One server node serves Letta's REST API over the simulated network; no faults (the property
is about routing, not recovery, and a seed stays cheap). ``agents`` agents are made, each
with children of every kind a route names beside its agent: a finished run, a conversation,
an archival passage and a scheduled message (a year away, so it never fires). Then, for
every ordered pair of agents (X, Y) and every child of Y, every route that takes an agent id
and a child id (:data:`PROBES`) is called with X's id and Y's child.

Properties (``ownership_contract``, :func:`check_ownership`, pure):

- **A child named through an agent that does not own it is not found**: every probe answers
  404 (Letta answers the same for a child of another agent as for no child at all), and a
  stream of another agent's run sends no message frame.
- **Such a request changes nothing**: every agent's runs, conversations, passages and
  schedules read back the same after the probes as before them.

Every route of the app with two ids is either probed or named in :data:`SHARED` with why
its second id is not owned by the first (``tests/workloads/test_agent_ownership.py`` fails on
a new two-id route that is neither).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import httpx
import trio

import kelpie_dst
from kelpie_agent.agent import CreateAgent, InputMessage
from kelpie_agent.agent._config import LoopConfig
from kelpie_agent.api import create_app
from kelpie_agent.http import serve
from kelpie_agent.llm import LlmRequest, ToolResult
from kelpie_agent.service import AgentService

from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_kv, sim_ports
from ..shims.llm import Call
from ._agent_http import _tls
from ._agent_schedules import OPTIONS, SERVICE
from ._agent_world import PORT, SERVER

__all__ = [
    "PROBES",
    "SHARED",
    "Cancel",
    "OwnershipLog",
    "agent_ownership",
    "check_cancels",
    "check_ownership",
]

YEAR_MS = 365 * 24 * 3600 * 1000

_QA = "query:agent_id"
# (method, route template, child kind, where the agent id goes, where the child id goes):
# "path", or "query:NAME" / "body:NAME" for a query or body field named NAME; "archive": the
# route's first id is the agent's archive (the parent of its "shared" passage), not the agent
PROBES: list[tuple[str, str, str, str, str]] = [
    ("POST", "/v1/runs/{run_id}/stream", "run", "body:agent_id", "path"),
    ("GET", "/v1/conversations/{conversation_id}/messages", "conversation", _QA, "path"),
    ("POST", "/v1/conversations/{conversation_id}/cancel", "conversation", _QA, "path"),
    ("POST", "/v1/messages/search", "conversation", "body:agent_id", "body:conversation_id"),
    ("GET", "/v1/runs", "conversation", "query:agent_id", "query:conversation_id"),
    ("DELETE", "/v1/agents/{agent_id}/archival-memory/{memory_id}", "passage", "path", "path"),
    ("GET", "/v1/agents/{agent_id}/schedule/{scheduled_message_id}", "schedule", "path", "path"),
    ("DELETE", "/v1/agents/{agent_id}/schedule/{scheduled_message_id}", "schedule", "path", "path"),
    ("DELETE", "/v1/archives/{archive_id}/passages/{passage_id}", "shared", "archive", "path"),
]
FILTERS = frozenset({"GET /v1/runs"})
"""Lists filtered by both ids: an empty list is as good as a 404 (nothing matches both)."""
"""Every probed route: an agent id with a child of another agent must answer 404."""

SHARED: dict[str, str] = {
    "/v1/agents/{agent_id}/archives/attach/{archive_id}": "archives are shared, attached",
    "/v1/agents/{agent_id}/archives/detach/{archive_id}": "archives are shared, attached",
    "/v1/agents/{agent_id}/core-memory/blocks/attach/{block_id}": "blocks are shared",
    "/v1/agents/{agent_id}/core-memory/blocks/detach/{block_id}": "blocks are shared",
    "/v1/agents/{agent_id}/core-memory/blocks/{block_label}": "a label, not an id",
    "/v1/agents/{agent_id}/files/{file_id}/close": "files belong to folders, attached",
    "/v1/agents/{agent_id}/files/{file_id}/open": "files belong to folders, attached",
    "/v1/agents/{agent_id}/folders/attach/{folder_id}": "folders are shared, attached",
    "/v1/agents/{agent_id}/folders/detach/{folder_id}": "folders are shared, attached",
    "/v1/agents/{agent_id}/identities/attach/{identity_id}": "identities are shared",
    "/v1/agents/{agent_id}/identities/detach/{identity_id}": "identities are shared",
    "/v1/agents/{agent_id}/tools/approval/{tool_name}": "tools are shared, by name",
    "/v1/agents/{agent_id}/tools/attach/{tool_id}": "tools are shared, attached",
    "/v1/agents/{agent_id}/tools/detach/{tool_id}": "tools are shared, attached",
    "/v1/agents/{agent_id}/tools/{tool_name}/run": "tools are shared, by name",
    "/v1/folders/{folder_id}/files/{file_id}": "a folder's file: not an agent's child",
    "/v1/folders/{folder_id}/{file_id}": "a folder's file: not an agent's child",
    "/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}": "a server's tool: not an agent's",
    "/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}/run": "a server's tool: not an agent's",
}
"""Two-id routes not probed, and why: mostly their second id is not a child owned by the
first; the ones marked NOT probed yet do have a parent and are left for a later session."""


LONG = 40  # tool calls a "long" run makes before it answers (each a step; about 6 s)


class Plain:
    """The model: a short plain answer; to an input that starts with "long", a search, step
    after step, ``LONG`` times (a run that lasts, so a cancel lands between its steps)."""

    def respond(self, request: LlmRequest, rng: Any) -> tuple[Any, ...]:
        results, text = 0, ""
        for message in reversed(request.messages):
            if message.role != "user":
                continue
            found = [b for b in message.content if isinstance(b, ToolResult)]
            if not found:
                text = message.text
                break
            results += len(found)
        if text.startswith("long") and results < LONG:
            return (Call("conversation_search", {"query": f"hello {results}"}),)
        return (f"noted: {text[:30]}",)


@attrs.define
class Probe:
    route: str
    as_agent: str
    owner: str
    child: str
    status: int
    frames: int = 0  # message frames a stream sent


@attrs.define
class Cancel:
    """``POST /v1/agents/{agent}/messages/cancel`` while ``active`` (the agent's runs, in its
    conversations) and ``others`` (another agent's) ran, after ``ended`` (the agent's) ended."""

    agent: str
    active: list[str]
    others: list[str]
    ended: list[str]
    status: int = 0
    stops: dict[str, str | None] = attrs.Factory(dict)  # run id -> its stop reason, at the end


@attrs.define
class OwnershipLog:
    children: dict[str, dict[str, str]] = attrs.Factory(dict)  # agent -> kind -> id
    before: dict[str, Any] = attrs.Factory(dict)  # agent -> what it read back
    after: dict[str, Any] = attrs.Factory(dict)
    probes: list[Probe] = attrs.Factory(list)
    cancels: list[Cancel] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)


class Http:
    def __init__(self, client: httpx.AsyncClient, node: str) -> None:
        self.client, self.base = client, f"http://{node}:{PORT}"

    async def call(
        self, method: str, path: str, *, params: Any = None, body: Any = None
    ) -> httpx.Response:
        return await self.client.request(method, self.base + path, params=params, json=body)

    async def json(self, method: str, path: str, **kw: Any) -> Any:
        answer = await self.call(method, path, **kw)
        answer.raise_for_status()
        return answer.json()


async def _children(http: Http, service: AgentService, number: int) -> tuple[str, dict[str, str]]:
    view = await service.create_agent(CreateAgent(name=f"owner-{number}"), include_base_tools=False)
    agent = view.agent.id
    await service.send_message(agent, [InputMessage("user", f"hello from {number}")])
    runs = await http.json("GET", "/v1/runs", params={"agent_id": agent})
    conv = await http.json("POST", "/v1/conversations", params={"agent_id": agent}, body={})
    said = [InputMessage("user", f"hello in a conversation of {number}")]
    await service.send_message(agent, said, conversation_id=conv["id"])
    passages = await http.json(
        "POST", f"/v1/agents/{agent}/archival-memory", body={"text": f"fact {number}"}
    )
    schedule = {"type": "one-time", "scheduled_at": YEAR_MS * 60}
    text = [{"role": "user", "content": f"later {number}"}]
    sched = await http.json(
        "POST", f"/v1/agents/{agent}/schedule", body={"messages": text, "schedule": schedule}
    )
    archive = await http.json("POST", "/v1/archives", body={"name": f"archive-{number}"})
    await http.call("PATCH", f"/v1/agents/{agent}/archives/attach/{archive['id']}")
    shared = await http.json(
        "POST", f"/v1/archives/{archive['id']}/passages", body={"text": f"shared fact {number}"}
    )
    kinds = {
        "run": runs[0]["id"],
        "conversation": conv["id"],
        "passage": passages[0]["id"],
        "schedule": sched["id"],
        "archive": archive["id"],  # an archive attached to the agent, and its passage
        "shared": shared["id"],
    }
    return agent, kinds


async def _read(http: Http, agent: str) -> dict[str, Any]:
    def ids(items: Any) -> list[str]:
        rows = items if isinstance(items, list) else items.get("scheduled_messages", items)
        return sorted(str(r["id"]) for r in rows)

    return {
        "runs": [
            (r["id"], r["status"])
            for r in await http.json("GET", "/v1/runs", params={"agent_id": agent})
        ],
        "conversations": ids(
            await http.json("GET", "/v1/conversations", params={"agent_id": agent})
        ),
        "passages": ids(await http.json("GET", f"/v1/agents/{agent}/archival-memory")),
        "schedules": ids(await http.json("GET", f"/v1/agents/{agent}/schedule")),
        "messages": [m["id"] for m in await http.json("GET", f"/v1/agents/{agent}/messages")],
    }


async def _probe(http: Http, log: OwnershipLog, x: str, y: str) -> None:
    for method, route, kind, agent_at, child_at in PROBES:
        child = log.children[y][kind]
        path = route.replace("{agent_id}", x).replace("{archive_id}", log.children[x]["archive"])
        params: dict[str, Any] = {}
        body: dict[str, Any] = {}
        for value, at in ((x, agent_at), (child, child_at)):
            if at == "archive":  # the agent's archive is in the path already
                continue
            if at == "path":
                if value == child and "}" in path:  # the route's last id is the child's
                    name = path[path.rindex("{") : path.rindex("}") + 1]
                    path = path.replace(name, child)
                continue
            place, field = at.split(":")
            (params if place == "query" else body)[field] = value
        if route == "/v1/messages/search":
            body["query"] = "hello"
        probe = Probe(f"{method} {route}", x, y, child, 0)
        if route.endswith("/stream"):
            async with http.client.stream(
                method, http.base + path, json=body, timeout=5.0
            ) as answer:
                probe.status = answer.status_code
                async for line in answer.aiter_lines():
                    probe.frames += '"message_type"' in line
        else:
            answer = await http.call(method, path, params=params or None, body=body or None)
            probe.status = answer.status_code
            if probe.route in FILTERS and answer.status_code == 200 and answer.json() == []:
                probe.status = 404  # nothing matched both: as good as not found
        log.probes.append(probe)


async def _cancel(
    http: Http, service: AgentService, log: OwnershipLog, pause: Callable[[], Awaitable[None]]
) -> None:
    """An agent with a short run in one conversation and a long one in another, and another
    agent with a long run; the agent's runs are cancelled once the short one has ended, after
    ``pause()`` (which may freeze the server past its leases, so that the long runs are
    resumed by the agents' next activations when the cancel comes)."""

    async def agent(name: str) -> str:
        return (await service.create_agent(CreateAgent(name=name))).agent.id

    async def start(agent_id: str, text: str, conv: str | None) -> str:
        said = [InputMessage("user", text)]
        run = await service.start_run(agent_id, said, max_steps=LONG + 5, conversation_id=conv)
        return run.id

    a, b = await agent("canceller"), await agent("bystander")
    convs = [
        (await http.json("POST", "/v1/conversations", params={"agent_id": a}, body={}))["id"]
        for _ in range(2)
    ]
    short = await start(a, "short one", convs[0])
    long_a, long_b = await start(a, "long one", convs[1]), await start(b, "long two", None)
    for _ in range(50):  # the short run ends first (one step)
        if (await http.json("GET", f"/v1/runs/{short}"))["status"] != "running":
            break
        await trio.sleep(0.1)
    await trio.sleep(1.0)  # the long run is in its steps (registered, not queued)
    await pause()
    running = (await http.json("GET", f"/v1/runs/{long_a}"))["status"] == "running"
    cancel = Cancel(a, [long_a] if running else [], [long_b], [short])
    log.cancels.append(cancel)
    cancel.status = (await http.call("POST", f"/v1/agents/{a}/messages/cancel")).status_code
    for run, owner in ((long_a, a), (long_b, b), (short, a)):
        for polls in range(600):
            got = await http.json("GET", f"/v1/runs/{run}")
            if got["status"] != "running":
                cancel.stops[run] = got.get("stop_reason")
                break
            if polls % 40 == 39:  # a run its request gave up on waits for the agent's next
                await _wake(service, owner)  # activation, which resumes it: make one
            await trio.sleep(0.5)


async def _wake(service: AgentService, agent_id: str) -> None:
    """Send the agent a message, as its user would when a run seems stuck."""
    with contextlib.suppress(Exception):
        await service.start_run(agent_id, [InputMessage("user", "are you there?")])


def check_cancels(cancels: list[Cancel]) -> list[str]:
    """Cancelling an agent's runs reaches every active run of it, in every conversation, even
    after another of its runs ended, and no other agent's run."""
    out = []
    for c in cancels:
        where = f"cancelling {c.agent}'s runs"
        if c.status != 200:
            out.append(f"{where}: answered {c.status}")
        for run in c.active:
            if c.stops.get(run) != "cancelled":
                out.append(f"{where}: its run {run} ended {c.stops.get(run)!r}, not cancelled")
        for run in c.others:
            if c.stops.get(run) == "cancelled":
                out.append(f"{where}: another agent's run {run} was cancelled")
    return out


def check_ownership(log: OwnershipLog) -> list[str]:
    """The properties of the module docstring, against ``log``."""
    out = list(log.problems) + check_cancels(log.cancels)
    for p in log.probes:
        if p.status != 404 or p.frames:
            out.append(
                f"{p.route} as {p.as_agent} with {p.owner}'s {p.child}: answered {p.status}"
                + (f" and streamed {p.frames} message frames" if p.frames else "")
                + ", want 404"
            )
    for agent, before in log.before.items():
        after = log.after.get(agent)
        if after is not None and after != before:
            changed = sorted(k for k in before if before[k] != after.get(k))
            out.append(f"agent {agent}: foreign requests changed its {changed}")
    return out


@workload(params={"agents": 2, "cancels": False, "cancel_pauses": False}, bounds={"agents": (2, 6)})
async def agent_ownership(ctx: WorkloadContext) -> None:
    """Children named through agents that do not own them; see the module docstring."""
    log = OwnershipLog()
    ctx.state["ownership"] = log
    db = ctx.sim.add_node(ctx.topology.database or "db")
    services: dict[str, AgentService] = {}

    async def server(node: kelpie_dst.Node) -> None:
        from kelpie_agent.service import open_agent_node

        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=SimLlmClient(Plain(), timing=LlmTiming(ttft_min=0.05, ttft_max=0.2)),
            loop_config=LoopConfig(),
            dispatcher_options=OPTIONS,
            options=SERVICE,
            observer=kelpie_dst.log,
        ) as service:
            services[node.name] = service
            await serve(create_app(service), "0.0.0.0", PORT, SERVER)

    name = (ctx.topology.nodes or ("server-1",))[0]
    ctx.sim.add_node(name, server)
    while name not in services:
        await trio.sleep(0.1)
    await trio.sleep(0.5)  # the listener is up
    service = services[name]
    async with httpx.AsyncClient(timeout=httpx.Timeout(20.0), verify=_tls()) as client:
        http = Http(client, name)
        for number in range(int(ctx.params["agents"])):
            agent, kinds = await _children(http, service, number)
            log.children[agent] = kinds
        agents = list(log.children)
        for agent in agents:
            log.before[agent] = await _read(http, agent)
        for x in agents:
            for y in agents:
                if x != y:
                    await _probe(http, log, x, y)
        for agent in agents:
            log.after[agent] = await _read(http, agent)
        if ctx.params.get("cancels"):
            await _cancel(http, service, log, lambda: _pause(ctx, name))
    ctx.metric("ownership.probes", len(log.probes))
    ctx.metric(
        "ownership.cancelled",
        sum(c.stops.get(r) == "cancelled" for c in log.cancels for r in c.active),
    )


async def _pause(ctx: WorkloadContext, name: str) -> None:
    """With ``cancel_pauses``, in about half the seeds: freeze the server for longer than a
    lease (6 s), so that every lease it holds lapses mid-run; its agents' next activations
    resume the interrupted runs, and the cancel comes a moment after (Dlead21-4)."""
    rng = ctx.rng("ownership/pause")
    if not ctx.params.get("cancel_pauses") or rng.random() < 0.5:
        return
    node = ctx.sim.node(name)
    ctx.sim.pause(node)
    await trio.sleep(rng.uniform(6.5, 9.0))
    ctx.sim.resume(node)
    await trio.sleep(rng.uniform(0.05, 0.6))  # the resumed runs are in their steps


@invariant
def ownership_contract(ctx: WorkloadContext) -> None:
    """A child named through an agent that does not own it is not found, and the request
    changes nothing (:func:`check_ownership`)."""
    log = ctx.state.get("ownership")
    if isinstance(log, OwnershipLog):
        problems = check_ownership(log)
        assert not problems, "a child reached through the wrong agent: " + "; ".join(problems[:5])
