"""Running one checked tool call. Every failure becomes a failed result, never an exception.

Tools that change the agent's own state (the memory tools) run *inside* the transaction that
also stores their tool return and the checkpoint: they read the block in that transaction, so
a concurrent edit of a shared block makes the transaction conflict and the edit is re-done on
the new value, and a crash before the commit leaves neither the edit nor the result behind.
Every other tool runs before the transaction, and its writes (an archival passage) go into it.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from kelpie_agent.errors import KelpieError
from kelpie_agent.storage import Transaction

from . import _memory_edits as edits
from ._archive import archive_of, parse_when
from ._builtins import FILE_TOOLS
from ._codec import Keys, pack, unpack
from ._file_tools import run_file_tool
from ._memory_edits import ToolError
from ._models import DEFAULT_BLOCK_LIMIT, Block, ToolSpec, check_label
from ._outcome import ToolOutcome, TxnTool, failure
from ._recall import all_messages, search_by_date, search_text
from ._runtime import AgentRuntime
from ._sandbox_calls import run_code, run_custom
from ._toolset import Prepared

__all__ = ["ToolOutcome", "TxnTool", "failure", "run_tool"]

MAX_PAUSE_MINUTES = 360  # Letta's MAX_PAUSE_HEARTBEATS


def _text(value: Any) -> str:
    if value is None:
        return "None"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


async def run_tool(rt: AgentRuntime, call: Prepared) -> ToolOutcome | TxnTool:
    """Run ``call`` (or return the function to run inside the step's transaction)."""
    name = call.tool.name
    try:
        if call.tool.builtin is not None:
            return await _builtin(rt, name, call.args)
        spec = call.tool.spec
        if spec.tool_type == "external_mcp":
            return await _mcp(rt, spec, call.args)
        return await run_custom(rt, spec, call.args)
    except ToolError as error:
        return failure(name, error.kind, error.message)
    except (KelpieError, ValueError, TypeError, KeyError) as error:
        return failure(name, type(error).__name__, str(error))


def _guard(name: str, body: TxnTool) -> TxnTool:
    async def run(txn: Transaction) -> ToolOutcome:
        try:
            return await body(txn)
        except ToolError as error:
            return failure(name, error.kind, error.message)

    return run


async def _builtin(rt: AgentRuntime, name: str, args: dict[str, Any]) -> ToolOutcome | TxnTool:
    agent = rt.require()
    if name == "send_message":
        return ToolOutcome(True, "Sent message successfully.")
    if name == "memory_finish_edits":
        return ToolOutcome(True, "None")
    if name == "pause_heartbeats":
        minutes = max(0, min(int(args["minutes"]), MAX_PAUSE_MINUTES))
        return ToolOutcome(
            True, f"Pausing timed heartbeats for {minutes} min", pause_minutes=minutes
        )
    if name in (
        "core_memory_append",
        "core_memory_replace",
        "memory_replace",
        "memory_insert",
        "memory_rethink",
    ):
        return _guard(name, _memory_tool(rt, name, args))
    if name == "archival_memory_insert":
        archive = await archive_of(rt)
        record = await archive.prepare(args["content"], args.get("tags"))
        return ToolOutcome(
            True,
            "None",
            writes=tuple(archive.writes(record)),
            after=(lambda: archive.added(record),),
        )
    if name == "archival_memory_search":
        archive = await archive_of(rt)
        hits = await archive.search(
            args["query"],
            top_k=args.get("top_k") or 5,
            tags=args.get("tags"),
            tag_match_mode=args.get("tag_match_mode") or "any",
            start=parse_when(
                args.get("start_datetime"), agent.timezone, end=False, what="start_datetime"
            ),
            end=parse_when(args.get("end_datetime"), agent.timezone, end=True, what="end_datetime"),
        )
        found = [
            {
                "timestamp": _iso(h.passage.created_at),
                "content": h.passage.text,
                "tags": sorted(h.passage.tags),
            }
            for h in hits
        ]
        return ToolOutcome(True, json.dumps(found, ensure_ascii=False))
    if name == "conversation_search":
        messages = await all_messages(rt)
        text = search_text(
            messages,
            args["query"],
            roles=args.get("roles"),
            limit=args.get("limit"),
            start=parse_when(args.get("start_date"), agent.timezone, end=False, what="start_date"),
            end=parse_when(args.get("end_date"), agent.timezone, end=True, what="end_date"),
        )
        return ToolOutcome(True, text)
    if name == "conversation_search_date":
        messages = await all_messages(rt)
        text = search_by_date(
            messages, args["start_date"], args["end_date"], args.get("page", 0), agent.timezone
        )
        return ToolOutcome(True, text)
    if name == "run_code":
        return await run_code(rt, name, args["code"], args["language"])
    if name in FILE_TOOLS:
        return await run_file_tool(rt, name, args)
    raise ToolError(f"built-in tool {name!r} has no implementation", "NotImplementedError")


def _iso(epoch: float) -> str:
    from ._messages import iso_date

    return iso_date(epoch)


def _memory_tool(rt: AgentRuntime, name: str, args: dict[str, Any]) -> TxnTool:
    async def run(txn: Transaction) -> ToolOutcome:
        agent = rt.require()
        blocks: dict[str, Block] = {}
        for block_id in agent.block_ids:
            data = await txn.get(Keys.block(block_id))
            if data is not None:
                block: Block = unpack(data)
                blocks.setdefault(block.label, block)
        label = args["label"]
        now = rt.now()
        block_or_none = blocks.get(label)
        if block_or_none is None:
            if name != "memory_rethink":
                raise edits.missing_block(label, list(blocks))
            return _create_block(rt, label, args["new_memory"], now)
        current = block_or_none
        value = current.value
        if name == "core_memory_append":
            value, text = edits.append(value, args["content"]), "None"
        elif name == "core_memory_replace":
            value = edits.replace_all(value, label, args["old_content"], args["new_content"])
            text = "None"
        elif name == "memory_replace":
            value = edits.replace_once(value, label, args["old_string"], args["new_string"])
            text = edits.EDIT_SUCCESS(label)
        elif name == "memory_insert":
            value = edits.insert(value, args["new_string"], args.get("insert_line", -1))
            text = edits.EDIT_SUCCESS(label)
        else:
            value, text = args["new_memory"], edits.EDIT_SUCCESS(label)
        new = edits.apply_edit(current, value, now)
        return ToolOutcome(
            True,
            text,
            writes=((Keys.block(new.id), pack(new)),),
            after=(lambda: rt.blocks.__setitem__(new.id, new),),
        )

    return run


def _create_block(rt: AgentRuntime, label: str, value: str, now: float) -> ToolOutcome:
    try:
        check_label(label)
    except ValueError as error:
        raise ToolError(str(error)) from None
    if len(value) > DEFAULT_BLOCK_LIMIT:
        raise ToolError(
            f"Edit failed: Exceeds {DEFAULT_BLOCK_LIMIT} character limit (requested {len(value)})."
        )
    block = Block(id=rt.new_id("block"), label=label, value=value, created_at=now, updated_at=now)
    agent = attrs.evolve(
        rt.require(), block_ids=(*rt.require().block_ids, block.id), updated_at=now
    )

    def apply() -> None:
        rt.blocks[block.id] = block
        rt.agent = agent

    return ToolOutcome(
        True,
        edits.EDIT_SUCCESS(label),
        writes=((Keys.block(block.id), pack(block)), (rt.keys.agent, pack(agent))),
        after=(apply,),
    )


async def _mcp(rt: AgentRuntime, spec: ToolSpec, args: dict[str, Any]) -> ToolOutcome:
    client = rt.env.mcp
    server = spec.mcp_server
    if client is None or not server:
        raise ToolError(f"no MCP server is configured for tool {spec.name!r}", "RuntimeError")
    tool = str(spec.metadata.get("mcp_tool", spec.name))
    timeout = rt.config.tool_timeout
    for attempt in range(2):
        try:
            if attempt:
                await client.reconnect(server)
            result = await client.call_tool(server, tool, args, timeout=timeout)
        except KelpieError as error:
            # A server found dead before the call was sent is started again once and called
            # again. A call it may have run (it died holding it, or the call timed out) is
            # never resent: its effect could happen twice (Dlead25-1).
            sent = bool(getattr(error, "outcome_unknown", False))
            if attempt == 0 and not sent and _broken(client, server):
                continue
            return failure(spec.name, type(error).__name__, str(error))
        return ToolOutcome(not result.is_error, result.text)
    raise AssertionError("unreachable")


def _broken(client: Any, server: str) -> bool:
    try:
        return bool(client.status(server) == "broken")
    except KelpieError:
        return False
