"""Standalone blocks and tools (Letta's ``/v1/blocks/`` and ``/v1/tools/``).

They live outside any agent (``block/<id>``, ``tool/<id>``), so these methods use the agent
core's ``BlockStore`` and ``ToolStore`` directly and never touch an actor. Agents read the
blocks they have attached again on every request, so an edit here reaches them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.agent import AgentView, Block, Keys, ToolSpec, load_view
from kelpie_agent.agent._builtins import builtin_by_id
from kelpie_agent.agent._codec import unpack
from kelpie_agent.agent._models import DEFAULT_BLOCK_LIMIT

from . import _validate as v
from ._base import ServiceBase
from ._errors import InvalidError, NotFoundError, translate
from ._index import _all
from ._types import paginate

__all__ = ["Catalog"]

_BLOCK_FIELDS = ("value", "limit", "description", "read_only", "label", "metadata")


def _ordered(items: list[Any]) -> list[Any]:
    return sorted(items, key=lambda x: (x.created_at, x.id))


# What a tool keeps through an update unless the update gives it (a new source rebuilds the
# rest of the spec from the source).
_KEPT_TOOL_FIELDS = ("tags", "return_char_limit", "metadata")


class Catalog(ServiceBase):
    """Standalone blocks and tools."""

    # -- blocks --------------------------------------------------------------------------------
    async def create_block(
        self,
        label: str,
        value: str = "",
        *,
        limit: int | None = None,
        description: str = "",
        read_only: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> Block:
        checked = {"value": value, "description": description, "read_only": read_only}
        checked["metadata"] = metadata or {}
        if limit is not None:
            checked["limit"] = limit
        self._check_block(label=label, **checked)
        return await self._store(
            lambda: self.block_store.create(
                label,
                value,
                limit=limit,
                description=description,
                read_only=read_only,
                metadata=metadata,
            ),
            f"block {label}",
            retry=False,
        )

    async def get_block(self, block_id: str) -> Block:
        v.ident(block_id, "block_id")
        return await self._store(
            lambda: self.block_store.get(block_id), f"block {block_id}", retry=True
        )

    async def list_blocks(
        self,
        *,
        label: str | None = None,
        label_search: str | None = None,
        value_search: str | None = None,
        description_search: str | None = None,
        agents_gt: int | None = None,
        agents_lt: int | None = None,
        agents_eq: Sequence[int] = (),
        after: str | None = None,
        before: str | None = None,
        limit: int = 50,
        order: str = "asc",
    ) -> list[Block]:
        """Standalone blocks (every block, attached or not), oldest first by default. Letta's
        filters: ``label``; ``label_search``/``value_search``/``description_search`` (a
        case-insensitive part); the number of agents a block is attached to, more than
        ``agents_gt``, fewer than ``agents_lt``, one of ``agents_eq``."""
        limit, descending = v.page_limit(limit), v.order(order)
        if label is not None:
            v.label(label)
        blocks = await self._store(lambda: self.block_store.list(label), "blocks", retry=True)
        searches = [
            (field, text.casefold())
            for field, text in (
                ("label", label_search),
                ("value", value_search),
                ("description", description_search),
            )
            if text
        ]
        blocks = [
            b
            for b in blocks
            if all(text in str(getattr(b, field) or "").casefold() for field, text in searches)
        ]
        if agents_gt is not None or agents_lt is not None or agents_eq:
            counts: dict[str, int] = {}
            for _, data in await _all(self.read, Keys.AGENTS):
                for block_id in dict.fromkeys(unpack(data).block_ids):
                    counts[block_id] = counts.get(block_id, 0) + 1

            def connected(b: Block) -> bool:
                n = counts.get(b.id, 0)
                return (
                    (agents_gt is None or n > agents_gt)
                    and (agents_lt is None or n < agents_lt)
                    and (not agents_eq or n in agents_eq)
                )

            blocks = [b for b in blocks if connected(b)]
        return paginate(
            _ordered(blocks),
            lambda b: b.id,
            kind="block",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def update_block(self, block_id: str, **changes: Any) -> Block:
        """Change a standalone block: ``value``, ``limit``, ``description``, ``read_only``,
        ``label``, ``metadata``."""
        v.ident(block_id, "block_id")
        unknown = sorted(set(changes) - set(_BLOCK_FIELDS))
        if unknown:
            raise InvalidError(unknown[0], f"cannot be updated ({', '.join(_BLOCK_FIELDS)} can)")
        current = await self.get_block(block_id)
        merged = {f: changes.get(f, getattr(current, f)) for f in _BLOCK_FIELDS}
        self._check_block(**merged)
        # a new label an agent using the block already has is refused in the transaction
        return await self._store(
            lambda: self.block_store.update(block_id, **changes), f"block {block_id}", retry=False
        )

    async def delete_block(self, block_id: str) -> None:
        await self.get_block(block_id)
        await self._store(
            lambda: self.block_store.delete(block_id), f"block {block_id}", retry=False
        )

    async def block_agents(
        self,
        block_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        order: str = "asc",
    ) -> list[AgentView]:
        """The agents that have the block attached, oldest first by default (reads storage
        only), paged with Letta's cursors (agent ids); all of them by default."""
        limit = None if limit is None else v.page_limit(limit)
        descending = v.order(order)
        await self.get_block(block_id)
        rows = await _all(self.read, Keys.AGENTS)
        agents = _ordered([a for a in (unpack(v) for _, v in rows) if block_id in a.block_ids])
        chosen = paginate(
            agents,
            lambda a: a.id,
            kind="agent",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )
        views = [await load_view(self.read, a.id, self.loop_config.history_window) for a in chosen]
        return [view for view in views if view is not None]

    @staticmethod
    def _check_block(**fields: Any) -> None:
        if "label" in fields:
            v.label(fields["label"])
        v.text(fields["value"], "value", empty=True)
        v.text(fields["description"], "description", empty=True)
        if not isinstance(fields["read_only"], bool):
            raise InvalidError("read_only", f"must be true or false, got {fields['read_only']!r}")
        v.metadata(fields["metadata"])
        limit = v.int_at_least(fields.get("limit", DEFAULT_BLOCK_LIMIT), "limit", 1)
        if len(fields["value"]) > limit:
            raise InvalidError(
                "value",
                f"has {len(fields['value'])} characters, over its limit {limit}",
                status=400,
            )

    # -- tools ---------------------------------------------------------------------------------
    def _tool_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in options.items():
            if value is None:
                continue
            if name == "description":
                v.text(value, name, empty=True)
            elif name == "tags":
                value = v.tags(value)
            elif name == "return_char_limit":
                v.int_at_least(value, name, 1)
            elif name in ("json_schema", "metadata"):
                v.metadata(value, name)
            elif name == "name":
                v.text(value, name)
            out[name] = value
        return out

    async def create_tool(self, source_code: str, **options: Any) -> ToolSpec:
        """A custom tool from Python source: the function's name, its Google-style docstring
        and type hints give the schema (unless ``json_schema`` is given). Options:
        ``description``, ``json_schema``, ``tags``, ``return_char_limit``, ``name``."""
        spec = self._build(source_code, options)
        return await self._store(
            lambda: self.tool_store.create(source_code, **self._tool_options(options)),
            f"tool {spec.name}",
            retry=False,
        )

    async def upsert_tool(self, source_code: str, **options: Any) -> ToolSpec:
        """Create the tool, or replace the custom tool with the same name (keeping its id)."""
        self._build(source_code, options)
        return await self._store(
            lambda: self.tool_store.upsert(source_code, **self._tool_options(options)),
            "a tool",
            retry=False,
        )

    def _build(self, source_code: object, options: Mapping[str, Any]) -> ToolSpec:
        v.text(source_code, "source_code")
        assert isinstance(source_code, str)
        try:
            return self.tool_store.build(source_code, **self._tool_options(options))
        except Exception as error:
            mapped = translate(error)
            if mapped is None:
                raise
            raise mapped from error

    async def get_tool(self, tool_id: str) -> ToolSpec:
        v.ident(tool_id, "tool_id")
        return await self._store(
            lambda: self.tool_store.get(tool_id), f"tool {tool_id}", retry=True
        )

    async def list_tools(
        self,
        *,
        name: str | None = None,
        names: Sequence[str] = (),
        tool_ids: Sequence[str] = (),
        tool_types: Sequence[str] = (),
        exclude_tool_types: Sequence[str] = (),
        search: str | None = None,
        letta_only: bool = False,
        after: str | None = None,
        before: str | None = None,
        limit: int = 50,
        order: str = "asc",
    ) -> list[ToolSpec]:
        """Every tool: the built-ins first, then the stored ones by name. Letta's filters:
        ``name``/``names`` (any of them), ``tool_ids``, ``tool_types`` (any of them),
        ``exclude_tool_types``, ``search`` (a case-insensitive part of the name) and
        ``letta_only`` (Letta's ``return_only_letta_tools``: types ``letta_*``)."""
        limit, descending = v.page_limit(limit), v.order(order)
        tools = await self._store(lambda: self.tool_store.list(), "tools", retry=True)
        wanted_names = set(v.tags(list(names), "names")) | ({name} if name is not None else set())
        ids = set(v.tags(list(tool_ids), "tool_ids"))
        types, excluded = set(v.tags(list(tool_types), "tool_types")), set(exclude_tool_types)
        needle = search.casefold() if search else None

        def keep(t: ToolSpec) -> bool:
            return (
                (not wanted_names or t.name in wanted_names)
                and (not ids or t.id in ids)
                and (not types or t.tool_type in types)
                and t.tool_type not in excluded
                and (needle is None or needle in t.name.casefold())
                and (not letta_only or t.tool_type.startswith("letta_"))
            )

        tools = [t for t in tools if keep(t)]
        return paginate(
            tools,
            lambda t: t.id,
            kind="tool",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def update_tool(self, tool_id: str, **changes: Any) -> ToolSpec:
        """Change a stored tool: ``source_code`` and ``json_schema`` (custom tools only),
        ``description``, ``tags``, ``return_char_limit``, ``metadata``. A new source rebuilds
        the schema (and the description, unless given); the other fields keep their values
        unless given."""
        v.ident(tool_id, "tool_id")
        if builtin_by_id(tool_id) is not None:
            raise InvalidError("tool_id", "built-in tools cannot be changed", status=400)
        allowed = (
            "source_code",
            "json_schema",
            "description",
            "tags",
            "return_char_limit",
            "metadata",
        )
        unknown = sorted(set(changes) - set(allowed))
        if unknown:
            raise InvalidError(unknown[0], f"cannot be updated ({', '.join(allowed)} can)")
        current = await self.get_tool(tool_id)
        options = self._tool_options({k: changes.get(k) for k in allowed[1:]})
        kept = {f: options.pop(f, getattr(current, f)) for f in _KEPT_TOOL_FIELDS}
        if changes.get("source_code") is not None or "json_schema" in options:
            if current.tool_type != "custom":
                raise InvalidError(
                    "source_code", f"a {current.tool_type} tool has no source", status=400
                )
            source = changes.get("source_code") or current.source_code or ""
            fresh = self._build(source, options)
            new = attrs.evolve(fresh, id=current.id, created_at=current.created_at, **kept)
        else:
            now = self.ports.clock.now()
            new = attrs.evolve(current, **options, **kept, updated_at=now)
        return await self._store(lambda: self.tool_store.save(new), f"tool {tool_id}", retry=False)

    async def delete_tool(self, tool_id: str) -> None:
        v.ident(tool_id, "tool_id")
        if builtin_by_id(tool_id) is not None:
            raise InvalidError("tool_id", "built-in tools cannot be deleted", status=400)
        await self._store(lambda: self.tool_store.delete(tool_id), f"tool {tool_id}", retry=False)

    async def tool_named(self, name: str) -> ToolSpec:
        """The tool called ``name`` (built-in or stored), for Letta's ``tools=[names]``."""
        v.text(name, "name")
        found = await self._store(lambda: self.tool_store.by_name(name), f"tool {name}", retry=True)
        if found is None:
            raise NotFoundError("tool", None, f"there is no tool named {name!r}")
        return found
