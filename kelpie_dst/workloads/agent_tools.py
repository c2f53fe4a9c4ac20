"""Tools as users write and call them, over REST, under faults (``agent_tools``, toolI).

Server nodes (``topology.nodes``) share the database host, a sandbox each, a static MCP
server (``shelf``, which lists its tools two a page, answers ``shelf_multi`` in three text
blocks and ``shelf_shut`` with an ``isError`` result) and a model (:class:`ToolsPolicy`) that
calls exactly the tool its input names (``toolprobe {"tool": ..., "args": ...}``) and then
answers. One client, over HTTP (raw JSON,
as any REST client would send it), hopping to another node after a failure:

1. upserts five custom tools (``_agent_tools_model.TOOLS``: keyword-only and defaulted
   parameters of every documented type, a tool that talks on stdout and stderr, one that
   raises, one with a ``return_char_limit`` of its own, one with a description given) and
   reads each back; tries four sources that cannot be tools; upserts a tool with its
   ``json_schema`` given; makes a tool and deletes it;
2. lists the tools by ``name``, ``names`` and ``tool_types``, and upserts one tool again;
3. makes a memgpt agent and a letta_v1 agent with all of them and the shelf's tools (the
   memgpt agent first);
4. runs tools directly (``POST /v1/agents/{id}/tools/{name}/run``), with good arguments,
   with a required one missing and with one of the wrong type; updates one tool's source (a
   second, required parameter) and runs it again;
5. sends each agent probes whose model calls one tool, and reads the histories back;
6. runs built-in memory tools directly: ``memory_rethink`` creates a block and rewrites it,
   ``archival_memory_search`` finds what ``archival_memory_insert`` stored;
7. detaches one custom tool from the letta agent and lists both agents' tools.

``tools_contract`` (:mod:`._agent_tools_checks`) judges what it read against the workload's
model of each tool (:mod:`._agent_tools_model`): schemas as the documented rules give them,
lists holding exactly what their filter names, direct runs answering each function's return
value (or its exception in Letta's words), a call missing a required argument refused, and
every stored tool result the packaged return value, cut at the tool's own limit.
"""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import trio

import kelpie_dst
from kelpie_agent.agent import ToolStore, builtin_id
from kelpie_agent.agent._config import LoopConfig
from kelpie_agent.api import create_app
from kelpie_agent.http import serve
from kelpie_agent.llm import LlmRequest, TextBlock, ToolResult
from kelpie_agent.mcp import McpClient, McpServerConfig

from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_direct_kv, open_kv, open_sandbox, sim_ports
from ..shims._mcp import SimMcpServer, sim_mcp_transport
from ..shims.llm import Call, Reply
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_schedules import OPTIONS, SERVICE
from ._agent_tools_checks import ListSeen, RunSeen, StoredCall, ToolsLog, check_tools
from ._agent_tools_model import (
    BAD_SOURCES,
    GIVEN,
    GIVEN_SCHEMA,
    KIND_VALUES,
    LONG_LIMIT,
    MCP_BLOCKS,
    MCP_REFUSAL,
    MCP_SERVER,
    MCP_TOOLS,
    OUTPUT_LIMIT,
    SCRATCH,
    TOOLS,
    VERSION,
    VERSION_1,
    WIDE,
    WIDE_CASES,
)

__all__ = ["agent_tools", "tools_contract"]

PORT = 8283
PROBE = "toolprobe"
ATTEMPTS = 40
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
LOOP = LoopConfig(storage_attempts=3)
MCP_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


class GaveUpError(Exception):
    """A request that never got an answer the client could use."""


class ToolsPolicy:
    """The model: calls the tool its run's input names, once, then answers (through
    ``send_message`` when the agent has it)."""

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        memgpt = request.tool("send_message") is not None
        for position in range(len(request.messages) - 1, -1, -1):
            message = request.messages[position]
            if message.role != "user":
                continue
            for block in message.content:
                if isinstance(block, TextBlock) and block.text.startswith(PROBE + " "):
                    probe = json.loads(block.text[len(PROBE) + 1 :])
                    done = any(
                        isinstance(b, ToolResult)
                        for m in request.messages[position + 1 :]
                        for b in m.content
                    )
                    if not done:
                        args = dict(probe["args"])
                        tool = request.tool(str(probe["tool"]))
                        props = tool.input_schema.get("properties", {}) if tool else {}
                        if "request_heartbeat" in props:
                            args["request_heartbeat"] = True
                        return (Call(str(probe["tool"]), args),)
                    text = f"done {probe['tag']}"
                    return (Call("send_message", {"message": text}),) if memgpt else (text,)
        return (Call("send_message", {"message": "idle"}),) if memgpt else ("idle",)


def _shelf() -> SimMcpServer:
    def echo(name: str) -> Any:
        return lambda args: f"{name}: {args.get('text', '')}"

    responses: dict[str, Any] = {
        "shelf_multi": lambda args: MCP_BLOCKS,  # a tuple: three text blocks
        "shelf_shut": {"error": MCP_REFUSAL},
    }
    tools = [
        {
            "name": name,
            "description": f"The shelf's {name}.",
            "input_schema": MCP_SCHEMA,
            "response": responses.get(name, echo(name)),
        }
        for name in MCP_TOOLS
    ]
    return SimMcpServer(MCP_SERVER, tools, latency=(0.02, 0.1), page_size=2)


def _start_servers(ctx: WorkloadContext, db: kelpie_dst.Node) -> None:
    from kelpie_agent.sandbox import SandboxLimits
    from kelpie_agent.service import open_agent_node

    limits = SandboxLimits(max_output_bytes=OUTPUT_LIMIT) if ctx.params["output_limits"] else None

    timing = LlmTiming(ttft_min=0.05, ttft_max=0.2, tokens_per_second=400.0)
    shelf = _shelf()

    async def server(node: kelpie_dst.Node) -> None:
        llm = SimLlmClient(ToolsPolicy(), timing=timing)
        config = McpServerConfig(MCP_SERVER, "simulated", startup_timeout=10, call_timeout=10)
        async with (
            McpClient([config], transport=sim_mcp_transport(shelf)) as mcp,
            open_agent_node(
                open_kv(node, host=db),
                sim_ports(node),
                node_id=node.name,
                llm=llm,
                sandbox_factory=lambda r: open_sandbox(
                    node, name="tools", network=r.network, limits=limits
                ),
                mcp=mcp,
                loop_config=LOOP,
                dispatcher_options=OPTIONS,
                options=SERVICE,
                observer=kelpie_dst.log,
                **coherence_options(ctx, db),
            ) as service,
        ):
            await serve(create_app(service), "0.0.0.0", PORT)

    for name in ctx.topology.nodes or ("server-1", "server-2"):
        ctx.sim.add_node(name, server)


class ToolsClient:
    """The REST client (see the module docstring)."""

    def __init__(self, http: httpx.AsyncClient, nodes: tuple[str, ...], rng: random.Random):
        self.http = http
        self.nodes = nodes
        self.rng = rng
        self.node = rng.randrange(len(nodes))
        self.log = ToolsLog()
        self.requests = 0
        self.ids: dict[str, str] = {}  # tool name -> id
        self.agents: dict[str, str] = {}  # agent kind -> id

    async def request(
        self, method: str, path: str, body: Any = None, params: Any = None
    ) -> tuple[int, Any]:
        """One request until it is answered with a status the client may not retry."""
        for _ in range(ATTEMPTS):
            self.requests += 1
            node = self.nodes[self.node % len(self.nodes)]
            try:
                with trio.fail_after(30):
                    answer = await self.http.request(
                        method, f"http://{node}:{PORT}{path}", json=body, params=params
                    )
            except (httpx.TransportError, trio.TooSlowError, OSError):
                answer = None
            if answer is not None and answer.status_code not in RETRY_STATUS:
                try:
                    data = answer.json()
                except ValueError:
                    data = answer.text
                return answer.status_code, data
            self.node += 1  # another node, after a pause
            await trio.sleep(self.rng.uniform(0.5, 2.0))
        raise GaveUpError(f"{method} {path}: no usable answer in {ATTEMPTS} tries")

    async def ok(self, method: str, path: str, body: Any = None, params: Any = None) -> Any:
        status, data = await self.request(method, path, body, params)
        if not 200 <= status < 300:
            self.log.problems.append(f"{method} {path} answered {status}: {str(data)[:200]}")
            raise GaveUpError(f"{method} {path} answered {status}")
        return data

    # -- 1. the tools ----------------------------------------------------------------------
    async def upsert_tools(self) -> None:
        for case in TOOLS:
            body: dict[str, Any] = {"source_code": case.source}
            if case.return_char_limit is not None:
                body["return_char_limit"] = case.return_char_limit
            if case.description is not None:
                body["description"] = case.description
            tool = await self.ok("PUT", "/v1/tools/", body)
            self.ids[case.name] = str(tool["id"])
            self.log.schemas.append((f"PUT /v1/tools/ ({case.name}) answered", case.name, tool))
            seen = await self.ok("GET", f"/v1/tools/{tool['id']}")
            self.log.schemas.append((f"GET /v1/tools/{{id}} ({case.name})", case.name, seen))
        tool = await self.ok("PUT", "/v1/tools/", {"source_code": VERSION_1})
        self.ids[VERSION.name] = str(tool["id"])

    async def definitions(self) -> None:
        """Sources that cannot be tools (refused), a tool whose json_schema is given, and a
        tool made and deleted (gone from reads and lists)."""
        for what, source in BAD_SOURCES:
            status, data = await self.request("PUT", "/v1/tools/", {"source_code": source})
            self.log.refusals.append((f"PUT /v1/tools/ with {what}", status, str(data)))
        body = {"source_code": GIVEN.source, "json_schema": GIVEN_SCHEMA}
        tool = await self.ok("PUT", "/v1/tools/", body)
        self.ids[GIVEN.name] = str(tool["id"])
        self.log.schemas.append(("PUT /v1/tools/ (tc_given, json_schema given)", GIVEN.name, tool))
        seen = await self.ok("GET", f"/v1/tools/{tool['id']}")
        self.log.schemas.append(("GET /v1/tools/{id} (tc_given)", GIVEN.name, seen))
        scratch = await self.ok("PUT", "/v1/tools/", {"source_code": SCRATCH})
        path = f"/v1/tools/{scratch['id']}"
        status, data = await self.request("DELETE", path)
        if status not in (200, 404):  # 404: a first try that landed
            self.log.problems.append(f"DELETE {path} answered {status}: {str(data)[:200]}")
        status, data = await self.request("GET", path)
        if status != 404:
            self.log.problems.append(f"GET {path} after its delete answered {status}, not 404")
        await self._list(
            "GET /v1/tools/?name=tc_scratch after its delete", [("name", "tc_scratch")], ()
        )

    # -- 2. lists --------------------------------------------------------------------------
    async def _list(self, what: str, params: Any, expected: tuple[str, ...]) -> None:
        got = await self.ok("GET", "/v1/tools/", params=params)
        names = tuple(str(t["name"]) for t in got)
        self.log.lists.append(ListSeen(what, names, expected, exact=True))

    async def lists(self) -> None:
        mine = [case.name for case in TOOLS]
        every = [*mine, VERSION.name, GIVEN.name]
        one = self.rng.choice(mine)
        await self._list(f"GET /v1/tools/?name={one}", [("name", one)], (one,))
        two = sorted(self.rng.sample(mine, 2))
        params = [("names", two[0]), ("names", two[1]), ("limit", "1000")]
        await self._list(f"GET /v1/tools/?names={two[0]}&names={two[1]}", params, tuple(two))
        await self._list(
            "GET /v1/tools/?name=send_message", [("name", "send_message")], ("send_message",)
        )
        await self._list("GET /v1/tools/?name=tc_absent", [("name", "tc_absent")], ())
        got = await self.ok("GET", "/v1/tools/", params=[("tool_types", "custom"), ("limit", 1000)])
        types = {str(t["tool_type"]) for t in got}
        if types - {"custom"}:
            self.log.problems.append(f"GET /v1/tools/?tool_types=custom listed types {types}")
        names = tuple(sorted(str(t["name"]) for t in got if str(t["name"]) in every))
        self.log.lists.append(
            ListSeen("GET /v1/tools/?tool_types=custom", names, tuple(sorted(every)), exact=True)
        )
        # an upsert of a tool that exists keeps it, under its id, and makes no second one (a
        # tool without a limit of its own: whether an upsert keeps one is not documented)
        again = self.rng.choice([c for c in TOOLS if c.return_char_limit is None])
        tool = await self.ok("PUT", "/v1/tools/", {"source_code": again.source, "tags": ["again"]})
        if str(tool["id"]) != self.ids[again.name]:
            self.log.problems.append(
                f"upserting {again.name} again answered id {tool['id']}, not {self.ids[again.name]}"
            )
        await self._list(
            f"GET /v1/tools/?name={again.name} after a second upsert",
            [("name", again.name)],
            (again.name,),
        )

    # -- 3. agents -------------------------------------------------------------------------
    async def _agent(self, name: str, agent_type: str, extra: tuple[str, ...]) -> str:
        found = await self.ok("GET", "/v1/agents/", params=[("name", name), ("limit", 5)])
        if found:
            return str(found[0]["id"])
        tool_ids = [*extra, *self.ids.values(), *self.log.mcp_ids.values()]
        body = {
            "name": name,
            "agent_type": agent_type,
            "include_base_tools": False,
            "tool_ids": tool_ids,
            "memory_blocks": [{"label": "persona", "value": f"I am {name}."}],
        }
        status, data = await self.request("POST", "/v1/agents/", body)
        if status == 409 or not 200 <= status < 300:  # a first try landed: look it up
            found = await self.ok("GET", "/v1/agents/", params=[("name", name), ("limit", 5)])
            if not found:
                self.log.problems.append(f"POST /v1/agents/ ({name}) answered {status}: {data}")
                raise GaveUpError(name)
            return str(found[0]["id"])
        return str(data["id"])

    async def make_agents(self) -> None:
        # the memgpt agent first: its tools' schemas (with request_heartbeat) are built first
        self.agents["memgpt"] = await self._agent(
            "tools-memgpt", "memgpt_agent", (builtin_id("send_message"),)
        )
        builtins = ("memory_rethink", "archival_memory_insert", "archival_memory_search")
        self.agents["letta"] = await self._agent(
            "tools-letta", "letta_v1_agent", tuple(builtin_id(name) for name in builtins)
        )

    # -- 4. direct runs --------------------------------------------------------------------
    def _run_cases(self) -> list[tuple[str, dict[str, Any], bool]]:
        """(tool, args, refused?) for the direct runs."""
        rng = self.rng
        cases: list[tuple[str, dict[str, Any], bool]] = [
            ("tc_shape", {"city": "Oslo", "units": "c"}, False),
            (
                "tc_shape",
                {
                    "city": "Rome",
                    "units": "f",
                    "days": rng.randint(1, 9),
                    "tags": ["sun", "wind"],
                    "mode": "far",
                    "scale": 2.5,
                    "loud": rng.random() < 0.5,
                },
                False,
            ),
            ("tc_shape", {"city": "Oslo"}, True),  # units is required (keyword-only)
            ("tc_shape", {"units": "c"}, True),
            ("tc_noisy", {"text": "kelp tide"}, False),
            ("tc_fail", {"reason": "no kelp today"}, False),
            ("shelf_multi", {}, False),
            (rng.choice(MCP_TOOLS[:4]), {"text": "tide"}, False),
            ("shelf_d", {"text": "last page"}, False),
            ("shelf_shut", {"text": "open"}, False),
            ("tc_kinds", {"kind": 5}, True),  # not a string
            ("tc_version", {"text": "a"}, False),
            ("tc_given", {"word": "kelp"}, False),
            ("tc_given", {"word": "a word far too long"}, True),  # over the given maxLength
        ]
        cases += [("tc_kinds", {"kind": kind}, False) for kind in KIND_VALUES]
        rng.shuffle(cases)
        return cases

    async def runs(self) -> None:
        await self._runs(self._run_cases())

    async def _runs(self, cases: list[tuple[str, dict[str, Any], bool]]) -> None:
        for tool, args, refused in cases:
            kind = self.rng.choice(("memgpt", "letta"))
            path = f"/v1/agents/{self.agents[kind]}/tools/{tool}/run"
            status, data = await self.request("POST", path, {"args": args})
            what = f"run {tool}({json.dumps(args, sort_keys=True)}) on the {kind} agent"
            self.log.runs.append(RunSeen(what, tool, args, refused, status, data))

    async def update_version(self) -> None:
        """A new source for tc_version (a second, required parameter): the answer and reads
        show the new schema, and runs and calls from now on use it."""
        path = f"/v1/tools/{self.ids[VERSION.name]}"
        tool = await self.ok("PATCH", path, {"source_code": VERSION.source})
        self.log.schemas.append((f"PATCH {path} answered", VERSION.name, tool))
        seen = await self.ok("GET", path)
        self.log.schemas.append((f"GET {path} after the PATCH", VERSION.name, seen))
        await self._runs(
            [("tc_version", {"text": "a"}, True), ("tc_version", {"text": "b", "times": 2}, False)]
        )

    # -- 5. the loop -----------------------------------------------------------------------
    def _probe(self, k: int) -> dict[str, Any]:
        rng = self.rng
        choice = rng.random()
        tag = f"p{k}"
        if choice < 0.35:
            n = rng.choice((12, LONG_LIMIT, LONG_LIMIT + 1, 2 * LONG_LIMIT + 7))
            return {"tool": "tc_long", "args": {"n": n}, "tag": tag}
        if choice < 0.55:
            return {"tool": "tc_kinds", "args": {"kind": rng.choice(list(KIND_VALUES))}, "tag": tag}
        if choice < 0.65:
            return {"tool": "tc_noisy", "args": {"text": f"note {k}"}, "tag": tag}
        if choice < 0.72:
            return {"tool": "tc_fail", "args": {"reason": f"reason {k}"}, "tag": tag}
        if choice < 0.78:
            return {"tool": "tc_shape", "args": {"city": f"c{k}", "units": "k"}, "tag": tag}
        if choice < 0.84:
            return {"tool": "tc_version", "args": {"text": f"w{k}", "times": 2}, "tag": tag}
        if choice < 0.88:
            return {"tool": "shelf_multi", "args": {}, "tag": tag}
        if choice < 0.92:
            return {"tool": "shelf_shut", "args": {"text": f"t{k}"}, "tag": tag}
        return {"tool": rng.choice(MCP_TOOLS[:4]), "args": {"text": f"t{k}"}, "tag": tag}

    async def sends(self, count: int) -> None:
        for k in range(count):
            kind = ("memgpt", "letta")[k % 2]
            probe = self._probe(k)
            text = f"{PROBE} " + json.dumps(probe, sort_keys=True)
            body = {"messages": [{"role": "user", "content": text, "otid": f"tools-{k}"}]}
            status, _ = await self.request("POST", f"/v1/agents/{self.agents[kind]}/messages", body)
            self.log.sends.append((kind, probe["tool"], status))

    async def read_back(self) -> None:
        for kind, agent in self.agents.items():
            page = await self.ok(
                "GET", f"/v1/agents/{agent}/messages", params=[("limit", 1000), ("order", "asc")]
            )
            calls: dict[str, tuple[str, str]] = {}
            for m in page:
                if m.get("message_type") == "tool_call_message":
                    call = m.get("tool_call") or {}
                    calls[str(call.get("tool_call_id"))] = (
                        str(call.get("name")),
                        str(call.get("arguments")),
                    )
                elif m.get("message_type") == "tool_return_message":
                    call_id = str(m.get("tool_call_id"))
                    name, arguments = calls.get(call_id, ("?", "{}"))
                    self.log.stored.append(
                        StoredCall(
                            kind,
                            call_id,
                            name,
                            arguments,
                            str(m.get("status")),
                            str(m.get("tool_return")),
                            tuple(m.get("stdout") or ()),
                            tuple(m.get("stderr") or ()),
                        )
                    )

    # -- 6. built-in tools run directly ---------------------------------------------------
    async def memory_runs(self) -> None:
        """memory_rethink creates a block, then rewrites it; a passage inserted by a direct
        run is found by a direct search. Each run and the reads after it are logged."""
        agent = self.agents["letta"]
        label = "tc-notes"
        for value in ("first note of the shelf", "second note of the shelf"):
            args = {"label": label, "new_memory": value}
            path = f"/v1/agents/{agent}/tools/memory_rethink/run"
            status, data = await self.request("POST", path, {"args": args})
            self.log.runs.append(
                RunSeen(
                    f"run memory_rethink({value!r})", "memory_rethink", args, False, status, data
                )
            )
            status, block = await self.request(
                "GET", f"/v1/agents/{agent}/core-memory/blocks/{label}"
            )
            got = (
                block.get("value")
                if status == 200 and isinstance(block, dict)
                else f"{status} {block}"
            )
            self.log.memory.append(
                (f"block {label} after memory_rethink({value!r})", str(got), value)
            )
        text = f"kelp passage {self.rng.randint(0, 999)}"
        args = {"content": text}
        path = f"/v1/agents/{agent}/tools/archival_memory_insert/run"
        status, data = await self.request("POST", path, {"args": args})
        self.log.runs.append(
            RunSeen(
                "run archival_memory_insert", "archival_memory_insert", args, False, status, data
            )
        )
        search: dict[str, Any] = {"query": text, "top_k": 3}
        path = f"/v1/agents/{agent}/tools/archival_memory_search/run"
        status, data = await self.request("POST", path, {"args": search})
        found = data.get("func_return") if status == 200 and isinstance(data, dict) else None
        try:
            contents = [hit.get("content") for hit in json.loads(str(found))]
        except (ValueError, AttributeError, TypeError):
            contents = [f"{status} {str(data)[:120]}"]
        self.log.memory.append(
            (
                "archival_memory_search run after the insert run",
                text if text in contents else str(contents),
                text,
            )
        )

    # -- 7. a detach -----------------------------------------------------------------------
    async def detach(self) -> None:
        """Detach one custom tool from the letta agent: its tools lose exactly that one, and
        the memgpt agent's keep it."""
        gone = self.rng.choice(TOOLS).name
        path = f"/v1/agents/{self.agents['letta']}/tools/detach/{self.ids[gone]}"
        status, data = await self.request("PATCH", path)
        if status not in (200, 404):  # 404: a first try that landed (the lists judge it)
            self.log.problems.append(f"PATCH {path} answered {status}: {str(data)[:200]}")
        mine = (*(case.name for case in TOOLS), VERSION.name, GIVEN.name)
        for kind in ("letta", "memgpt"):
            got = await self.ok(
                "GET", f"/v1/agents/{self.agents[kind]}/tools", params=[("limit", 1000)]
            )
            names = tuple(sorted(str(t["name"]) for t in got if str(t["name"]) in mine))
            left = tuple(sorted(n for n in mine if kind == "memgpt" or n != gone))
            what = f"GET /v1/agents/{{{kind}}}/tools after detaching {gone} from the letta agent"
            self.log.lists.append(ListSeen(what, names, left, exact=True))

    async def wide(self) -> None:
        """With ``output_limits``: tc_wide upserted and attached to both agents, then run with
        results under and over the sandboxes' output limit (a cut result is an error)."""
        tool = await self.ok("PUT", "/v1/tools/", {"source_code": WIDE.source})
        self.ids[WIDE.name] = str(tool["id"])
        for kind in ("letta", "memgpt"):
            path = f"/v1/agents/{self.agents[kind]}/tools/attach/{tool['id']}"
            await self.ok("PATCH", path)
        cases = [("tc_wide", {"n": n, "kind": kind}, False) for n, kind in WIDE_CASES]
        self.rng.shuffle(cases)
        await self._runs(cases)


async def _register(ctx: WorkloadContext, log: ToolsLog, db: kelpie_dst.Node) -> None:
    """The shelf's tools, registered on the database directly (an operator's provisioning)."""
    main = ctx.sim.current_node()
    assert main is not None
    store = ToolStore(open_direct_kv(main, host=db), sim_ports(main))
    for name in MCP_TOOLS:
        spec = await store.add_mcp_tool(MCP_SERVER, name, f"The shelf's {name}.", MCP_SCHEMA)
        log.mcp_ids[name] = spec.id


@workload(params={"sends": 12, "output_limits": False}, bounds={"sends": (0, 200)})
async def agent_tools(ctx: WorkloadContext) -> None:
    """Tools as users write and call them; see the module docstring."""
    db = ctx.sim.add_node(ctx.topology.database or "db")
    nodes = tuple(ctx.topology.nodes or ("server-1", "server-2"))
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
        client = ToolsClient(http, nodes, ctx.rng("tools"))
        ctx.state["tools"] = client
        await _register(ctx, client.log, db)
        _start_servers(ctx, db)
        try:
            await client.upsert_tools()
            await client.definitions()
            await client.lists()
            await client.make_agents()
            await client.runs()
            await client.update_version()
            await client.sends(int(ctx.params["sends"]))
            await client.read_back()
            await client.memory_runs()
            await client.detach()
            if ctx.params["output_limits"]:
                await client.wide()
        except GaveUpError as error:
            client.log.problems.append(f"the client gave up: {error}")
    log = client.log
    ctx.metric("tools.requests", client.requests)
    ctx.metric("tools.runs", len(log.runs))
    ctx.metric("tools.stored", len(log.stored))
    ctx.metric("tools.sends_ok", sum(1 for _, _, s in log.sends if 200 <= s < 300))


@invariant
def tools_contract(ctx: WorkloadContext) -> None:
    """Custom tools' schemas, the tool list's filters, direct runs and every stored tool
    result are what the documented contract and the workload's model of each tool say; see
    :func:`._agent_tools_checks.check_tools`."""
    client = ctx.state["tools"]
    assert isinstance(client, ToolsClient)
    problems = check_tools(client.log)
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
