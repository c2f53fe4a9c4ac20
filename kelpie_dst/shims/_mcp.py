"""SimMcpServer: an in-memory MCP server whose tools are defined by data, for simulations.

It speaks MCP's JSON-RPC to the official SDK's ``ClientSession`` over in-memory streams, with
the same JSON encoding as the SDK's stdio transport, so ``kelpie_agent.mcp.McpClient`` runs
unchanged on top of it (``transport=sim_mcp_transport(server)``). Every connection starts a
fresh simulated process (``start_latency`` to answer ``initialize``) that belongs to the calling
task's node; each request runs in its own task, and a tool call takes its ``latency`` in virtual
seconds, drawn from the stream ``mcp/<server>``. The tool definition format and the faults
(decided in :mod:`._mcp_faults`) are documented in docs/mcp.md.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import mcp_types as types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client import Transport
from mcp.shared.message import SessionMessage

from .._errors import UsageError
from .._public import current_simulation
from ._mcp_faults import McpFaults

if TYPE_CHECKING:
    from kelpie_agent.mcp import McpServerConfig

__all__ = ["SimMcpServer", "SimTool", "sim_mcp_transport"]

_PROTOCOL = "2025-11-25"


class SimMcpServer:
    """An MCP server defined by data. See the module docstring and docs/mcp.md."""

    def __init__(
        self,
        name: str,
        tools: Sequence[Mapping[str, Any]],
        *,
        latency: float | Sequence[float] = (0.01, 0.05),
        start_latency: float | Sequence[float] = 0.1,
        page_size: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"sim mcp server name must be a non-empty string, got {name!r}")
        where = f"sim mcp server {name!r}"
        self.name = name
        self.latency = parse_latency(latency, f"{where}: 'latency'")
        self.start_latency = parse_latency(start_latency, f"{where}: 'start_latency'")
        if page_size is not None and (not isinstance(page_size, int) or page_size < 1):
            raise UsageError(f"{where}: 'page_size' must be a positive integer, got {page_size!r}")
        self.page_size = page_size
        self.tools: dict[str, SimTool] = parse_tools(tools, where, self.latency)
        self.starts = 0  # processes started
        self.crashes = 0  # processes killed by mcp.server_crash
        self.calls: list[tuple[str, dict[str, Any]]] = []  # tool calls received, in order
        self.in_flight = 0  # requests being handled now, over all processes

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> SimMcpServer:
        """A server from a scenario table: ``{name, tools, latency?, start_latency?,
        page_size?}``."""
        if not isinstance(spec, Mapping) or "name" not in spec:
            raise UsageError(f"a sim mcp server needs a table with a 'name', got {spec!r}")
        allowed = {"name", "tools", "latency", "start_latency", "page_size"}
        unknown = sorted(set(spec) - allowed)
        if unknown:
            raise UsageError(
                f"sim mcp server {spec['name']!r}: unknown field {unknown[0]!r} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
        options = {k: spec[k] for k in ("latency", "start_latency", "page_size") if k in spec}
        return cls(spec["name"], spec.get("tools", []), **options)

    def __repr__(self) -> str:
        return f"<SimMcpServer {self.name} tools={list(self.tools)} starts={self.starts}>"

    @asynccontextmanager
    async def connect(
        self, config: McpServerConfig | None = None
    ) -> AsyncIterator[
        tuple[
            MemoryObjectReceiveStream[SessionMessage | Exception],
            MemoryObjectSendStream[SessionMessage],
        ]
    ]:
        """Start a fresh process; yield the client's (read, write) streams (an McpTransport)."""
        to_server, server_in = anyio.create_memory_object_stream[SessionMessage](math.inf)
        server_out, to_client = anyio.create_memory_object_stream[SessionMessage | Exception](
            math.inf
        )
        self.starts += 1
        process = _Process(self, self.starts, server_in, server_out)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(process.run, name=f"kelpie_dst.mcp[{self.name}#{self.starts}]")
            try:
                yield to_client, to_server
            finally:
                to_server.close()
                to_client.close()
                process.stop("disconnected")
                nursery.cancel_scope.cancel()


def sim_mcp_transport(*servers: SimMcpServer) -> Callable[[McpServerConfig], Transport]:
    """An McpTransport that starts the simulated server named like the config."""
    by_name: dict[str, SimMcpServer] = {}
    for server in servers:
        if server.name in by_name:
            raise UsageError(f"two sim mcp servers are named {server.name!r}")
        by_name[server.name] = server

    def transport(config: McpServerConfig) -> Transport:
        server = by_name.get(config.name)
        if server is None:
            raise FileNotFoundError(f"no simulated MCP server named {config.name!r}")
        return server.connect(config)

    return transport


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _encode(message: dict[str, Any]) -> SessionMessage:
    text = json.dumps(message)
    return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))


def _decode(item: SessionMessage) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(
        item.message.model_dump_json(by_alias=True, exclude_unset=True)
    )
    return decoded


class _Process:
    """One run of the server: reads requests, answers each in its own task."""

    def __init__(
        self,
        server: SimMcpServer,
        number: int,
        read: MemoryObjectReceiveStream[SessionMessage],
        write: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        self.server = server
        self.number = number
        self.read = read
        self.write = write
        self.sim = current_simulation()
        self.faults = McpFaults(self.sim, server.name)
        self.scope = trio.CancelScope()
        self.pending: dict[str | int, trio.CancelScope] = {}
        self.alive = True

    def trace(self, kind: str, **fields: Any) -> None:
        if self.sim is not None:
            self.sim.trace_event(kind, server=self.server.name, process=self.number, **fields)

    async def run(self) -> None:
        self.trace("mcp.start")
        with self.scope:
            async with trio.open_nursery() as nursery:
                try:
                    async for item in self.read:
                        self.dispatch(nursery, _decode(item))
                except (anyio.ClosedResourceError, anyio.EndOfStream):
                    pass
                self.stop("client closed stdin")

    def dispatch(self, nursery: trio.Nursery, message: dict[str, Any]) -> None:
        method = message.get("method")
        if "id" not in message:  # a notification (or a stray response): never answered
            if method == "notifications/cancelled":
                scope = self.pending.get((message.get("params") or {}).get("requestId", ""))
                if scope is not None:
                    self.trace("mcp.cancelled", request=message["params"]["requestId"])
                    scope.cancel()
            return
        if not isinstance(method, str):
            return
        nursery.start_soon(self.handle, message["id"], method, message.get("params") or {})

    def stop(self, reason: str) -> None:
        if not self.alive:
            return
        self.alive = False
        self.trace("mcp.exit", reason=reason)
        self.write.close()
        self.read.close()
        self.scope.cancel()

    async def reply(self, request_id: str | int, body: dict[str, Any]) -> None:
        if self.alive:
            try:
                await self.write.send(_encode({"jsonrpc": "2.0", "id": request_id, **body}))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

    async def handle(self, request_id: str | int, method: str, params: dict[str, Any]) -> None:
        if not self.alive:  # spawned just before the process died
            return
        with trio.CancelScope() as scope:
            self.pending[request_id] = scope
            self.server.in_flight += 1
            try:
                body = await self.answer(method, params)
            finally:
                del self.pending[request_id]
                self.server.in_flight -= 1
            if body is not None:
                await self.reply(request_id, body)

    async def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        server = self.server
        if method == "initialize":
            await trio.sleep(self.draw(server.start_latency) + self.faults.start_delay())
            version = params.get("protocolVersion")
            return {
                "result": {
                    "protocolVersion": version if isinstance(version, str) else _PROTOCOL,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": server.name, "version": "kelpie-sim"},
                }
            }
        if method == "ping":
            return {"result": {}}
        if method == "tools/list":
            if self.faults.crashes(method, None):
                self.crash()
                return None
            if self.faults.list_hangs():
                self.trace("mcp.list_hang")
                await trio.sleep_forever()
            return {"result": self.list_tools(params.get("cursor"))}
        if method == "tools/call":
            return await self.call(params)
        return {"error": {"code": types.METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}

    def crash(self) -> None:
        self.server.crashes += 1
        self.trace("mcp.crash")
        self.stop("crashed")

    def list_tools(self, cursor: object) -> dict[str, Any]:
        tools = [tool.listing() for tool in self.server.tools.values()]
        size = self.server.page_size or len(tools) or 1
        start = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
        page: dict[str, Any] = {"tools": tools[start : start + size]}
        if start + size < len(tools):
            page["nextCursor"] = str(start + size)
        return page

    async def call(self, params: dict[str, Any]) -> dict[str, Any] | None:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        tool = self.server.tools.get(name) if isinstance(name, str) else None
        if tool is None or not isinstance(arguments, dict):
            problem = f"Unknown tool: {name}" if tool is None else "arguments must be an object"
            return {"error": {"code": types.INVALID_PARAMS, "message": problem}}
        self.server.calls.append((tool.name, arguments))
        self.trace("mcp.call", tool=tool.name)
        if self.faults.crashes("tools/call", tool.name):
            self.crash()
            return None
        if self.faults.hangs(tool.name):
            await trio.sleep_forever()
        await trio.sleep(self.draw(tool.latency))
        try:
            produced: Any = tool.respond(arguments)
            if inspect.isawaitable(produced):
                produced = await produced
            # a tuple is several text blocks, one per item (a list is one JSON value)
            items = produced if isinstance(produced, tuple) else (produced,)
            texts, is_error = [_as_text(item) for item in items], tool.fails
        except Exception as error:  # the tool failed: an isError result, like a real server
            texts, is_error = [f"Error executing tool {tool.name}: {error}"], True
        if self.faults.dies_after(tool.name):  # the effect happened; the process dies
            self.crash()
            return None
        if self.faults.loses_reply(tool.name):  # the effect happened; the answer never comes
            self.trace("mcp.reply_lost", tool=tool.name)
            await trio.sleep_forever()
        content = [{"type": "text", "text": text} for text in texts]
        return {"result": {"content": content, "isError": is_error}}

    def draw(self, bounds: tuple[float, float]) -> float:
        """Seconds uniformly in ``bounds``, from the server's stream (the low end outside a
        simulation)."""
        low, high = bounds
        if self.sim is None or low == high:
            return low
        return low + (high - low) * self.sim.rng(f"mcp/{self.server.name}").random()


_RESPONSES = "{text = ...}, {echo = ARGUMENT}, {error = ...} or a callable"


@attrs.frozen
class SimTool:
    """A tool of a :class:`SimMcpServer`, parsed from its definition."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = attrs.field(eq=False, repr=False)
    kind: str  # "text", "echo", "error" or "call"
    value: Any = attrs.field(eq=False)
    latency: tuple[float, float] = (0.0, 0.0)

    @property
    def fails(self) -> bool:
        return self.kind == "error"

    def listing(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
        }

    def respond(self, arguments: dict[str, Any]) -> str | Awaitable[str]:
        if self.kind in ("text", "error"):
            return str(self.value)
        if self.kind == "echo":
            if self.value not in arguments:
                raise ValueError(f"missing argument {self.value!r}")
            found = arguments[self.value]
            return found if isinstance(found, str) else json.dumps(found, sort_keys=True)
        result: str | Awaitable[str] = self.value(dict(arguments))
        return result


def parse_latency(value: object, where: str) -> tuple[float, float]:
    """A latency: seconds, or ``[low, high]`` seconds (uniform)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        low = high = float(value)
    elif (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        low, high = float(value[0]), float(value[1])
    else:
        raise UsageError(f"{where} must be seconds or [low, high] seconds, got {value!r}")
    if not (0 <= low <= high < math.inf):
        raise UsageError(f"{where} must satisfy 0 <= low <= high, got {value!r}")
    return low, high


def _tool(spec: object, where: str, default_latency: tuple[float, float]) -> SimTool:
    if not isinstance(spec, Mapping):
        raise UsageError(f"{where}: expected a table, got {spec!r}")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    where = f"{where} ({name!r})"
    allowed = {"name", "description", "input_schema", "response", "latency"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise UsageError(
            f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise UsageError(f"{where}: 'description' must be a string")
    response = spec.get("response")
    kind: str
    if callable(response):
        kind, value = "call", response
    elif isinstance(response, Mapping) and len(response) == 1:
        [(kind, value)] = response.items()
        if kind not in ("text", "echo", "error") or not isinstance(value, str):
            raise UsageError(f"{where}: 'response' must be {_RESPONSES}, got {dict(response)!r}")
    else:
        raise UsageError(f"{where}: 'response' must be {_RESPONSES}, got {response!r}")
    schema = spec.get("input_schema")
    if schema is None:
        properties = {value: {"type": "string"}} if kind == "echo" else {}
        schema = {"type": "object", "properties": properties}
        if kind == "echo":
            schema["required"] = [value]
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise UsageError(f"{where}: 'input_schema' must be a JSON Schema with type 'object'")
    latency = default_latency
    if "latency" in spec:
        latency = parse_latency(spec["latency"], f"{where}: 'latency'")
    return SimTool(name, description, dict(schema), kind, value, latency)


def parse_tools(
    specs: Sequence[Mapping[str, Any]], where: str, latency: tuple[float, float]
) -> dict[str, SimTool]:
    if isinstance(specs, str | bytes | Mapping) or not isinstance(specs, Sequence):
        raise UsageError(f"{where}: 'tools' must be a list of tool tables")
    tools: dict[str, SimTool] = {}
    for number, spec in enumerate(specs, 1):
        tool = _tool(spec, f"{where}: tool #{number}", latency)
        if tool.name in tools:
            raise UsageError(f"{where}: tool #{number}: the name {tool.name!r} is used twice")
        tools[tool.name] = tool
    return tools
