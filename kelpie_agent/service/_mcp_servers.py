"""MCP servers managed at run time (Letta's ``mcp_servers``): a record per server in the KV
(``mcpserver/<id>``), their tools registered as ``external_mcp`` tools, and the node's view of
them (:class:`ManagedMcp`).

Every node serves the managed servers through its own ``McpClient``: before each call it reads
the server's record, so a server created, updated or deleted on any node takes effect on the
next call everywhere. A call to a server whose record is gone fails with an ``McpToolError``
(the agent sees a failed tool result) and closes this node's connection to it. Servers of the
static configuration (docs/mcp.md) are served by the ``static`` source, as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from kelpie_agent.agent import McpToolSource, ToolSpec, ToolStore
from kelpie_agent.agent._retry import Reader
from kelpie_agent.mcp import McpClient, McpConfigError, McpError, McpServerConfig, McpToolError
from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

from ._errors import InvalidError, NotFoundError, UnavailableError, translate

if TYPE_CHECKING:
    from ._service import AgentService

__all__ = ["MASK", "ManagedMcp", "McpServerRecord", "McpServerStore"]

PREFIX = b"mcpserver/"
MASK = "****"
"""Shown instead of a secret (env values, tokens, header values); sent back in an update, it
keeps the stored value."""
ServerType = Literal["stdio", "sse", "streamable_http"]


def _key(server_id: str) -> bytes:
    return PREFIX + server_id.encode()


@attrs.frozen
class McpServerRecord:
    """One managed MCP server, as stored (secrets in clear; the API masks them)."""

    id: str
    server_name: str
    mcp_server_type: ServerType
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    server_url: str | None = None
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: Mapping[str, str] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    def config(self) -> McpServerConfig:
        """The client configuration; raises :class:`McpConfigError` for what cannot connect."""
        if self.mcp_server_type == "stdio":
            return McpServerConfig(
                self.server_name, self.command or "", self.args, dict(self.env or {})
            )
        if self.mcp_server_type == "sse":
            raise McpConfigError(
                f"mcp server {self.server_name!r}: the SSE transport is not supported "
                "(use streamable_http)",
                server=self.server_name,
            )
        headers = dict(self.custom_headers or {})
        if self.auth_header and self.auth_token:
            headers[self.auth_header] = self.auth_token
        return McpServerConfig.http(self.server_name, self.server_url or "", headers)

    def to_json(self) -> bytes:
        return json.dumps(attrs.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> McpServerRecord:
        fields = json.loads(data)
        fields["args"] = tuple(fields.get("args") or ())
        return cls(**fields)


def merge_secrets(old: Mapping[str, str] | None, new: Mapping[str, str]) -> dict[str, str]:
    """``new``, with masked values replaced by the stored ones."""
    kept = dict(old or {})
    return {k: kept.get(k, v) if v == MASK else v for k, v in new.items()}


class McpServerStore:
    """Managed MCP server records, outside any actor; names are unique."""

    def __init__(self, kv: KV, ports: Ports) -> None:
        self.kv = kv
        self.ports = ports
        self.read = Reader(kv, ports.rng, 8, 0.05)

    async def all(self) -> list[McpServerRecord]:
        rows = await self.read(lambda: self.kv.scan_prefix(PREFIX), "mcp servers")
        found = [McpServerRecord.from_json(v) for _, v in rows]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def get(self, server_id: str) -> McpServerRecord:
        data = await self.read(lambda: self.kv.get(_key(server_id)), "an mcp server")
        if data is None:
            raise NotFoundError("mcp server", server_id)
        return McpServerRecord.from_json(data)

    async def by_name(self, name: str) -> McpServerRecord | None:
        return next((r for r in await self.all() if r.server_name == name), None)

    async def save(self, record: McpServerRecord, *, new: bool) -> McpServerRecord:
        """Write ``record``; its name must be free (checked in the writing transaction)."""

        async def build(txn: Transaction) -> McpServerRecord:
            if not new and await txn.get(_key(record.id)) is None:
                raise NotFoundError("mcp server", record.id)
            for _, value in await txn.scan_prefix(PREFIX):
                other = McpServerRecord.from_json(value)
                if other.server_name == record.server_name and other.id != record.id:
                    raise InvalidError(
                        "server_name",
                        f"an mcp server named {record.server_name!r} exists ({other.id})",
                        status=409,
                    )
            await txn.set(_key(record.id), record.to_json())
            return record

        saved: McpServerRecord = await self.read.transact(build, f"mcp server {record.id}")
        return saved

    async def delete(self, server_id: str) -> McpServerRecord:
        async def build(txn: Transaction) -> McpServerRecord:
            data = await txn.get(_key(server_id))
            if data is None:
                raise NotFoundError("mcp server", server_id)
            await txn.delete(_key(server_id))
            return McpServerRecord.from_json(data)

        gone: McpServerRecord = await self.read.transact(build, f"mcp server {server_id}")
        return gone


class ManagedMcp:
    """The node's MCP tool source: managed servers (KV records) through ``client``, the
    static configuration through ``static``."""

    def __init__(
        self, kv: KV, ports: Ports, client: McpClient, static: McpToolSource | None = None
    ) -> None:
        self.store = McpServerStore(kv, ports)
        self.client = client
        self.static = static

    async def sync(self, server: str) -> bool:
        """Make this node's client match ``server``'s record; False if it is not managed."""
        record = await self.store.by_name(server)
        if record is None:
            await self.client.remove_server(server)
            return False
        config = record.config()
        if server not in self.client.servers or self.client.config(server) != config:
            await self.client.add_server(config)
        return True

    def is_static(self, server: str) -> bool:
        """A server of the static configuration (served without reading the KV)."""
        if self.static is None:
            return False
        try:
            self.static.status(server)
        except McpError:
            return False
        return True

    async def _source(self, server: str) -> McpToolSource:
        if self.static is not None and self.is_static(server):
            return self.static
        if await self.sync(server):
            return self.client
        if self.static is None:
            raise McpToolError(f"mcp server {server!r} does not exist (deleted?)", server=server)
        return self.static

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        source = await self._source(server)
        return await source.call_tool(server, tool, arguments, timeout=timeout)

    async def reconnect(self, server: str) -> None:
        await (await self._source(server)).reconnect(server)

    def status(self, server: str) -> str:
        if server in self.client.servers:
            return self.client.status(server)
        if self.static is None:
            raise McpError(f"no mcp server named {server!r}", server=server)
        return self.static.status(server)


# -- the service's operations (functions of an AgentService, as ``_archives``) ------------------
def managed(service: AgentService) -> ManagedMcp:
    found = getattr(service, "mcp_servers", None)
    if not isinstance(found, ManagedMcp):
        raise UnavailableError("this node has no MCP client")
    return found


def server_tools(specs: Sequence[ToolSpec], name: str) -> list[ToolSpec]:
    return [s for s in specs if s.tool_type == "external_mcp" and s.mcp_server == name]


async def fetch_tools(service: AgentService, record: McpServerRecord) -> list[Any]:
    """The server's tools as it lists them now (503 if it cannot be reached)."""
    mcp = managed(service)
    try:
        await mcp.sync(record.server_name)
        if mcp.client.status(record.server_name) == "broken":
            await mcp.client.reconnect(record.server_name)  # a refresh starts it afresh
        return await mcp.client.list_tools(record.server_name)
    except McpError as error:
        raise UnavailableError(str(error)) from None


async def refresh(
    service: AgentService, record: McpServerRecord, *, strict: bool = True
) -> dict[str, list[str]]:
    """Register the server's tools: new ones added, changed ones updated in place (same id,
    so agents keep them attached), vanished ones deleted. ``strict=False``: an unreachable
    server leaves its tools as they are."""
    try:
        listed = await fetch_tools(service, record)
    except UnavailableError:
        if strict:
            raise
        return {"added": [], "updated": [], "deleted": []}
    tools = ToolStore(service.kv, service.ports)
    mine = {s.name: s for s in server_tools(await tools.list(), record.server_name)}
    summary: dict[str, list[str]] = {"added": [], "updated": [], "deleted": []}
    for tool in listed:
        old = mine.pop(tool.name, None)
        if old is None:
            try:
                await tools.add_mcp_tool(
                    record.server_name, tool.name, tool.description, tool.input_schema
                )
            except Exception as error:
                if translate(error) is None:
                    raise
                service.observe("mcp.tool_skipped", server=record.server_name, tool=tool.name)
                continue
            summary["added"].append(tool.name)
            continue
        schema = {"name": tool.name, "description": tool.description}
        schema["parameters"] = dict(tool.input_schema)
        if dict(old.json_schema) != schema or old.description != tool.description:
            new = attrs.evolve(
                old,
                description=tool.description,
                json_schema=schema,
                updated_at=service.ports.clock.now(),
            )
            await tools.save(new)
            summary["updated"].append(tool.name)
    for name, spec in sorted(mine.items()):
        await tools.delete(spec.id)
        summary["deleted"].append(name)
    return summary
