"""Standalone tools and blocks: the registry the service layer manages outside any actor.

``ToolStore`` lists the built-ins (fixed ids) together with stored tools: custom tools made
from source code (schema derived by ``parse_tool_source``) and MCP tools. Names are unique.
``BlockStore`` holds standalone blocks, which agents attach by id. Both write through plain
KV transactions (these records are not owned by one actor).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from kelpie_agent.llm._types import TOOL_NAME
from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

from ._builtins import BUILTINS, builtin_by_id, builtin_by_name
from ._codec import Keys, pack, unpack
from ._custom_tools import parse_tool_source
from ._errors import (
    BlockLimitError,
    BlockNotFoundError,
    InvalidRequestError,
    NameConflictError,
    ToolDefinitionError,
    ToolNotFoundError,
)
from ._models import (
    DEFAULT_BLOCK_LIMIT,
    DEFAULT_RETURN_CHAR_LIMIT,
    AgentRecord,
    Block,
    ToolSpec,
    check_label,
)
from ._retry import Reader

__all__ = ["BlockStore", "ToolStore"]

_ATTEMPTS = 8
_BACKOFF = 0.05
T = TypeVar("T")


def _reader(kv: KV, ports: Ports) -> Reader:
    return Reader(kv, ports.rng, _ATTEMPTS, _BACKOFF)


async def _write(read: Reader, writes: list[tuple[bytes, bytes | None]], what: str) -> None:
    async def build(txn: Transaction) -> None:
        for key, value in writes:
            if value is None:
                await txn.delete(key)
            else:
                await txn.set(key, value)

    await read.transact(build, what)


class ToolStore:
    """Every tool: built-ins plus the custom and MCP tools stored under ``tool/<id>``."""

    def __init__(self, kv: KV, ports: Ports) -> None:
        self.kv = kv
        self.ports = ports
        self.read = _reader(kv, ports)

    async def _stored(self) -> list[ToolSpec]:
        rows = await self.read.scan_all(Keys.TOOLS, "the tools")
        return [unpack(value) for _, value in rows]

    async def list(self) -> list[ToolSpec]:
        """Built-ins first (in their fixed order), then stored tools by name."""
        stored = sorted(await self._stored(), key=lambda t: t.name)
        return [b.spec() for b in BUILTINS] + stored

    async def get(self, tool_id: str) -> ToolSpec:
        builtin = builtin_by_id(tool_id)
        if builtin is not None:
            return builtin.spec()
        data = await self.read.get(Keys.tool(tool_id), f"tool {tool_id}")
        if data is None:
            raise ToolNotFoundError(f"tool {tool_id!r} not found")
        spec: ToolSpec = unpack(data)
        return spec

    async def by_name(self, name: str) -> ToolSpec | None:
        builtin = builtin_by_name(name)
        if builtin is not None:
            return builtin.spec()
        return next((t for t in await self._stored() if t.name == name), None)

    async def save(self, spec: ToolSpec) -> ToolSpec:
        """Store ``spec`` (new, or replacing the stored tool with its id). Its name must be
        free: checked in the writing transaction, so two tools can never get one name."""
        if not TOOL_NAME.fullmatch(spec.name):
            raise ToolDefinitionError(f"tool name {spec.name!r} must match {TOOL_NAME.pattern}")
        if builtin_by_name(spec.name) is not None:
            raise NameConflictError(f"{spec.name!r} is the name of a built-in tool")

        async def build(txn: Transaction) -> ToolSpec:
            for _, value in await txn.scan_prefix(Keys.TOOLS):
                other: ToolSpec = unpack(value)
                if other.name == spec.name and other.id != spec.id:
                    raise NameConflictError(
                        f"a tool named {spec.name!r} already exists ({other.id})"
                    )
            await txn.set(Keys.tool(spec.id), pack(spec))
            return spec

        return await self.read.transact(build, f"tool {spec.name}")

    def build(
        self,
        source_code: str,
        *,
        description: str | None = None,
        json_schema: Mapping[str, Any] | None = None,
        tags: tuple[str, ...] = (),
        return_char_limit: int = DEFAULT_RETURN_CHAR_LIMIT,
        name: str | None = None,
        default_requires_approval: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> ToolSpec:
        """A custom tool from Python source (not stored); the schema comes from the source
        unless ``json_schema`` (Letta's ``{name, description, parameters}``) is given."""
        parsed = parse_tool_source(source_code, name)
        if json_schema is not None:
            params = json_schema.get("parameters")
            if not isinstance(params, Mapping) or params.get("type") != "object":
                raise ToolDefinitionError(
                    "json_schema.parameters must be a JSON schema of type object"
                )
            schema = dict(json_schema)
            schema.setdefault("name", parsed.name)
        else:
            desc = description if description is not None else parsed.description
            schema = {"name": parsed.name, "description": desc, "parameters": parsed.parameters}
        if schema["name"] != parsed.name:
            raise ToolDefinitionError(
                f"json_schema.name {schema['name']!r} is not the function {parsed.name!r}"
            )
        now = self.ports.clock.now()
        return ToolSpec(
            id=self.ports.ids.new("tool"),
            name=parsed.name,
            description=description
            if description is not None
            else str(schema.get("description", "")),
            json_schema=schema,
            tool_type="custom",
            source_code=source_code,
            tags=tags,
            return_char_limit=return_char_limit,
            created_at=now,
            updated_at=now,
            default_requires_approval=default_requires_approval,
            metadata=dict(metadata or {}),
        )

    async def create(self, source_code: str, **options: Any) -> ToolSpec:
        """Store a new custom tool (options as for :meth:`build`)."""
        return await self.save(self.build(source_code, **options))

    async def upsert(self, source_code: str, **options: Any) -> ToolSpec:
        """Create, or replace the custom tool with the same name (keeping its id)."""
        fresh = self.build(source_code, **options)
        existing = await self.by_name(fresh.name)
        if existing is None:
            return await self.save(fresh)
        if existing.tool_type != "custom":
            raise InvalidRequestError(f"{fresh.name!r} is a {existing.tool_type} tool")
        spec = attrs.evolve(fresh, id=existing.id, created_at=existing.created_at)
        return await self.save(spec)

    async def add_mcp_tool(
        self, server: str, name: str, description: str, input_schema: Mapping[str, Any]
    ) -> ToolSpec:
        """Register a tool of MCP server ``server`` (from ``McpClient.list_tools``)."""
        if not isinstance(input_schema, Mapping) or input_schema.get("type") != "object":
            raise ToolDefinitionError(f"mcp tool {name!r}: input schema must be of type object")
        now = self.ports.clock.now()
        spec = ToolSpec(
            id=self.ports.ids.new("tool"),
            name=name,
            description=description,
            json_schema={
                "name": name,
                "description": description,
                "parameters": dict(input_schema),
            },
            tool_type="external_mcp",
            mcp_server=server,
            tags=(f"mcp:{server}",),
            metadata={"mcp_tool": name, "mcp_server": server},
            created_at=now,
            updated_at=now,
        )
        return await self.save(spec)

    async def delete(self, tool_id: str) -> None:
        if builtin_by_id(tool_id) is not None:
            raise InvalidRequestError("built-in tools cannot be deleted")
        await self.get(tool_id)
        await _write(self.read, [(Keys.tool(tool_id), None)], f"tool {tool_id}")


class BlockStore:
    """Standalone memory blocks (``block/<id>``)."""

    def __init__(self, kv: KV, ports: Ports) -> None:
        self.kv = kv
        self.ports = ports
        self.read = _reader(kv, ports)

    async def create(
        self,
        label: str,
        value: str = "",
        *,
        limit: int | None = None,
        description: str = "",
        read_only: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> Block:
        check_label(label)
        limit = DEFAULT_BLOCK_LIMIT if limit is None else limit
        if len(value) > limit:
            raise BlockLimitError(
                f"block {label!r}: value has {len(value)} characters, over its limit {limit}"
            )
        now = self.ports.clock.now()
        block = Block(
            id=self.ports.ids.new("block"),
            label=label,
            value=value,
            limit=limit,
            description=description,
            read_only=read_only,
            metadata=metadata or {},
            created_at=now,
            updated_at=now,
        )
        await _write(self.read, [(Keys.block(block.id), pack(block))], f"block {label}")
        return block

    async def get(self, block_id: str) -> Block:
        data = await self.read.get(Keys.block(block_id), f"block {block_id}")
        if data is None:
            raise BlockNotFoundError(f"block {block_id!r} not found")
        block: Block = unpack(data)
        return block

    async def list(self, label: str | None = None) -> list[Block]:
        rows = await self.read.scan_all(Keys.BLOCKS, "the blocks")
        blocks = [unpack(v) for _, v in rows]
        return [b for b in blocks if label is None or b.label == label]

    async def update(self, block_id: str, **changes: Any) -> Block:
        """Change a block. A new label must not be one that an agent using the block already
        has on another block (checked in the writing transaction)."""
        allowed = {"value", "limit", "description", "read_only", "label", "metadata"}
        unknown = sorted(set(changes) - allowed)
        if unknown:
            raise InvalidRequestError(f"cannot update {', '.join(unknown)} of a block")
        now = self.ports.clock.now()

        async def build(txn: Transaction) -> Block:
            data = await txn.get(Keys.block(block_id))
            if data is None:
                raise BlockNotFoundError(f"block {block_id!r} not found")
            old: Block = unpack(data)
            block = attrs.evolve(old, **changes, updated_at=now)
            if len(block.value) > block.limit:
                raise BlockLimitError(
                    f"block {block.label!r}: value has {len(block.value)} characters, over its "
                    f"limit {block.limit}"
                )
            if block.label != old.label:
                await _check_relabel(txn, block)
            await txn.set(Keys.block(block.id), pack(block))
            return block

        return await self.read.transact(build, f"block {block_id}")

    async def delete(self, block_id: str) -> None:
        await self.get(block_id)
        await _write(self.read, [(Keys.block(block_id), None)], f"block {block_id}")


async def _check_relabel(txn: Transaction, block: Block) -> None:
    """Refuse ``block``'s new label if an agent using it has another block with that label."""
    for _, value in await txn.scan_prefix(Keys.AGENTS):
        agent: AgentRecord = unpack(value)
        if block.id not in agent.block_ids:
            continue
        for other_id in agent.block_ids:
            if other_id == block.id:
                continue
            data = await txn.get(Keys.block(other_id))
            other: Block | None = unpack(data) if data is not None else None
            if other is not None and other.label == block.label:
                raise NameConflictError(
                    f"agent {agent.id} already has a block labelled {block.label!r} ({other.id})"
                )
