"""Requests that read or change an agent outside the loop: the agent itself, its blocks,
messages, archival memory and tools. Each change is one transaction (compute, commit, apply)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import attrs

from kelpie_agent.storage import Transaction

from ._boot import first_messages, stored_prompt
from ._builtins import MEMORY_TOOLS, builtin_by_id
from ._codec import Keys, pack, unpack
from ._errors import (
    AgentExistsError,
    BlockLimitError,
    BlockNotFoundError,
    InvalidRequestError,
    NameConflictError,
    ResourceNotFoundError,
    ToolNotFoundError,
)
from ._identities import identity_key
from ._identities import link_key as identity_link
from ._loop import compiled_system, load_toolset
from ._messages import AgentMessage, render_messages
from ._models import DEFAULT_BLOCK_LIMIT, AgentRecord, Block, ToolSpec, check_label
from ._requests import (
    UPDATABLE_FIELDS,
    AgentView,
    BlockCreate,
    CreateAgent,
    ListMessages,
    UpdateBlock,
)
from ._runtime import AgentRuntime
from ._tool_rules import ToolRule
from ._window import ContextWindow

__all__ = [
    "attach_block",
    "attach_tool",
    "create_agent",
    "delete_agent",
    "detach_block",
    "detach_tool",
    "list_messages",
    "reset_messages",
    "update_agent",
    "update_block",
    "view",
]

_UPDATABLE = frozenset(UPDATABLE_FIELDS)
_BATCH = 200


async def view(rt: AgentRuntime) -> AgentView:
    agent = rt.require()
    await rt.refresh_blocks()
    tools = await load_toolset(rt)
    specs = tuple(t.spec for t in tools.tools.values())
    session = rt.session
    return AgentView(
        agent,
        tuple(rt.ordered_blocks()),
        specs,
        session.stop_reason if session is not None else None,
        tuple(m.id for m in rt.history),
        await _folders(rt, agent),
    )


async def _folders(rt: AgentRuntime, agent: AgentRecord) -> tuple[Any, ...]:
    """The attached folders' records (none read for an agent without folders)."""
    from ._folders import load_folder

    kv = rt.ctx.kv
    found = []
    for folder_id in agent.folder_ids:
        folder = await rt.read(partial(load_folder, kv, folder_id), f"folder {folder_id}")
        if folder is not None:
            found.append(folder)
    return tuple(found)


def _block(spec: BlockCreate, rt: AgentRuntime, now: float) -> Block:
    limit = DEFAULT_BLOCK_LIMIT if spec.limit is None else spec.limit
    if len(spec.value) > limit:
        raise BlockLimitError(
            f"block {spec.label!r}: value has {len(spec.value)} characters, over its limit {limit}"
        )
    return Block(
        id=rt.new_id("block"),
        label=spec.label,
        value=spec.value,
        limit=limit,
        description=spec.description,
        read_only=spec.read_only,
        metadata=spec.metadata,
        created_at=now,
        updated_at=now,
    )


async def _existing_tool(rt: AgentRuntime, tool_id: str) -> ToolSpec:
    builtin = builtin_by_id(tool_id)
    if builtin is not None:
        return builtin.spec()
    key = Keys.tool(tool_id)
    data = await rt.get(key, f"tool {tool_id}")
    if data is None:
        raise ToolNotFoundError(f"tool {tool_id!r} not found")
    spec: ToolSpec = unpack(data)
    return spec


def _check_tool(agent: AgentRecord, spec: ToolSpec, names: list[str]) -> None:
    if spec.name in names:
        raise NameConflictError(f"agent {agent.id} already has a tool named {spec.name!r}")
    if agent.agent_type == "react_agent" and spec.name in MEMORY_TOOLS:
        raise InvalidRequestError(f"a react_agent has no memory tools; cannot attach {spec.name!r}")


async def create_agent(rt: AgentRuntime, request: CreateAgent) -> AgentView:
    if rt.agent is not None:
        raise AgentExistsError(f"agent {rt.agent_id} already exists")
    now = rt.now()
    agent = AgentRecord(
        id=rt.agent_id,
        name=request.name,
        agent_type=request.agent_type,
        system=request.system,
        model=request.model,
        embedding=request.embedding,
        context_window=request.context_window,
        max_tokens=request.max_tokens,
        description=request.description,
        tags=request.tags,
        metadata=request.metadata,
        tool_rules=request.tool_rules,
        timezone=request.timezone,
        max_files_open=request.max_files_open,
        per_file_view_window_char_limit=request.per_file_view_window_char_limit,
        created_at=now,
        updated_at=now,
    )
    labels: list[str] = []
    blocks: list[Block] = []
    for created in request.memory_blocks:
        blocks.append(_block(created, rt, now))
    for block_id in request.block_ids:
        data = await rt.get(Keys.block(block_id), f"block {block_id}")
        if data is None:
            raise BlockNotFoundError(f"block {block_id!r} not found")
        blocks.append(unpack(data))
    for block in blocks:
        if block.label in labels:
            raise InvalidRequestError(f"memory_blocks: label {block.label!r} appears twice")
        labels.append(block.label)
    names: list[str] = []
    for tool_id in request.tool_ids:
        spec = await _existing_tool(rt, tool_id)
        _check_tool(agent, spec, names)
        names.append(spec.name)
    identity_ids = await _existing(rt, "identity", request.identity_ids)
    folder_ids = await _existing(rt, "folder", request.folder_ids)
    agent = attrs.evolve(
        agent,
        block_ids=tuple(b.id for b in blocks),
        tool_ids=request.tool_ids,
        identity_ids=identity_ids,
    )
    leftovers = await rt.read(lambda: rt.ctx.kv.scan_prefix(rt.tkeys.messages, limit=1), "history")
    if leftovers:  # an agent with this id was deleted half-way: finish the job first
        await _delete_prefixes(rt)
    initial = first_messages(rt, request, agent, blocks, names)
    writes = [(Keys.block(b.id), pack(b)) for b in blocks[: len(request.memory_blocks)]]
    writes += [*rt.message_writes(initial), (rt.keys.agent, pack(agent))]
    writes += [(identity_link(i, agent.id), b"") for i in identity_ids]
    await rt.write(writes, "the new agent")
    rt.agent = agent
    rt.blocks = {b.id: b for b in blocks}
    rt.remember(initial)
    if folder_ids:
        from ._agent_files import attach_folder

        for folder_id in folder_ids:  # each its own transaction, as agents.folders.attach
            await attach_folder(rt, folder_id)
    return await view(rt)


async def _existing(rt: AgentRuntime, kind: str, ids: tuple[str, ...]) -> tuple[str, ...]:
    """``ids`` without repeats, in order, after checking that each exists (a 404 naming the
    first missing one, before anything is written)."""
    from ._folders import folder_key

    key = identity_key if kind == "identity" else folder_key
    unique = tuple(dict.fromkeys(ids))
    for target in unique:
        if await rt.get(key(target), f"{kind} {target}") is None:
            raise ResourceNotFoundError(kind, target)
    return unique


async def update_agent(rt: AgentRuntime, changes: Mapping[str, Any]) -> AgentView:
    agent = rt.require()
    unknown = sorted(set(changes) - _UPDATABLE)
    if unknown:
        raise InvalidRequestError(
            f"cannot update {', '.join(unknown)} (updatable: {', '.join(sorted(_UPDATABLE))})"
        )
    values = dict(changes)
    if "tags" in values:
        values["tags"] = tuple(values["tags"])
    if "tool_rules" in values:
        values["tool_rules"] = tuple(values["tool_rules"])
    new = attrs.evolve(agent, **values, updated_at=rt.now())
    await rt.write([(rt.keys.agent, pack(new))], "the agent")
    rt.agent = new
    return await view(rt)


async def set_tool_approval(rt: AgentRuntime, tool_name: str, required: bool) -> AgentView:
    """Add or remove the agent's ``requires_approval`` rule for its tool ``tool_name``, reading
    and writing the rules in one actor step (no lost update between concurrent changes)."""
    agent = rt.require()
    if tool_name not in (await load_toolset(rt)).names:
        raise ToolNotFoundError(f"the agent has no tool named {tool_name!r}")
    rules = [
        r
        for r in agent.tool_rules
        if not (r.type == "requires_approval" and r.tool_name == tool_name)
    ]
    if required:
        rules.append(ToolRule(tool_name, "requires_approval"))
    if tuple(rules) == tuple(agent.tool_rules):
        return await view(rt)
    new = attrs.evolve(agent, tool_rules=tuple(rules), updated_at=rt.now())
    await rt.write([(rt.keys.agent, pack(new))], "the agent")
    rt.agent = new
    return await view(rt)


async def _delete_keys(rt: AgentRuntime, keys: list[bytes], what: str) -> None:
    for start in range(0, len(keys), _BATCH):
        batch = keys[start : start + _BATCH]

        async def build(txn: Transaction, batch: list[bytes] = batch) -> None:
            for key in batch:
                await txn.delete(key)

        await rt.commit(build, what)


async def _delete_prefixes(
    rt: AgentRuntime, *, passages: bool = True, keep: set[bytes] | frozenset[bytes] = frozenset()
) -> None:
    """Delete the history (and the otid records that point into it) but the ``keep`` keys;
    with ``passages``, the archival memory, the runs and their steps too (an agent's
    deletion)."""
    prefixes = [rt.tkeys.messages, rt.tkeys.message_ids, rt.tkeys.otids]
    if passages:
        prefixes += [rt.keys.passages, rt.keys.passage_ids]
    for prefix in prefixes:
        rows = await rt.scan_all(prefix, "keys to delete")
        await _delete_keys(rt, [key for key, _ in rows if key not in keep], "old records")
    if passages:
        rows = await rt.scan_all(rt.keys.runs, "the runs")
        runs = [key for key, _ in rows]
        await _delete_keys(rt, [Keys.run(run_id_of(key)) for key in runs] + runs, "the runs")
        rows = await rt.scan_all(rt.keys.steps, "the steps")
        steps = [key for key, _ in rows]
        await _delete_keys(rt, [Keys.step(run_id_of(key)) for key in steps] + steps, "the steps")


def run_id_of(index_key: bytes) -> str:
    """The id at the end of a ``runs/<agent>/<created>/<run_id>`` index key (or of a
    ``steps/`` one)."""
    return index_key.rsplit(b"/", 1)[1].decode()


async def _left_over(rt: AgentRuntime) -> bool:
    """Whether records of an agent whose record is gone are still stored (its history, its
    archival memory, its runs): a deletion that stopped half-way."""
    for prefix in (rt.tkeys.messages, rt.keys.passages, rt.keys.runs):
        rows = await rt.read(partial(rt.ctx.kv.scan_prefix, prefix, limit=1), "left-over records")
        if rows:
            return True
    return False


async def delete_agent(rt: AgentRuntime) -> None:
    from ._agent_files import forget_files
    from ._conversations import delete_all_conversations
    from ._links import link_deletes
    from ._schedules import delete_all
    from ._teleport import image_keys, stored_image

    if rt.agent is None and await _left_over(rt):
        # An earlier attempt deleted the agent record, then storage failed: finish the job
        # before answering "not found", which the service takes for "deleted" when it retries.
        await _delete_prefixes(rt)
    rt.require()
    await delete_all(rt)  # first: a schedule must never fire for a deleted agent
    await delete_all_conversations(rt)
    for key, _ in [*await forget_files(rt), *link_deletes(rt)]:
        await _delete_keys(rt, [key], "the agent's links")
    await _delete_keys(rt, image_keys(rt.agent_id, await stored_image(rt)), "the sandbox image")
    await _delete_keys(rt, [rt.keys.agent, rt.tkeys.session, rt.tkeys.context], "the agent")
    rt.agent, rt.session, rt.blocks = None, None, {}
    rt.context = ContextWindow()
    rt.history.clear()
    rt.archive = None
    await _delete_prefixes(rt)
    await rt.close_sandbox()


async def reset_messages(rt: AgentRuntime) -> AgentView:
    """Delete the history but its stored system message, which is then recompiled (Letta's
    ``reset_messages_async`` with ``rebuild_system_prompt``)."""
    rt.require()
    prompt = await stored_prompt(rt)
    await _delete_keys(rt, [rt.tkeys.session, rt.tkeys.context], "the session")
    rt.session = None
    rt.context = ContextWindow()
    rt.history.clear()
    kept = set()
    if prompt is not None:
        kept = {rt.tkeys.message(prompt.seq), rt.tkeys.message_id(prompt.id)}
    await _delete_prefixes(rt, passages=False, keep=kept)
    if prompt is not None:
        rt.history.append(prompt)
        await compiled_system(rt, store=True)
    return await view(rt)


async def _seq_of(rt: AgentRuntime, message_id: str | None) -> int | None:
    if message_id is None:
        return None
    key = rt.tkeys.message_id(message_id)
    data = await rt.get(key, f"message {message_id}")
    if data is None:
        raise InvalidRequestError(f"message {message_id!r} not found on agent {rt.agent_id}")
    seq: int = unpack(data)
    return seq


async def list_messages(rt: AgentRuntime, request: ListMessages) -> list[AgentMessage]:
    rt.require()
    if request.order not in ("asc", "desc"):
        raise InvalidRequestError(f"order must be 'asc' or 'desc', got {request.order!r}")
    if isinstance(request.limit, bool) or not isinstance(request.limit, int) or request.limit < 0:
        raise InvalidRequestError(f"limit must be an integer >= 0, got {request.limit!r}")
    after, before = await _seq_of(rt, request.after), await _seq_of(rt, request.before)
    start = rt.tkeys.message(after + 1) if after is not None else rt.tkeys.messages
    end = rt.tkeys.message(before) if before is not None else Keys.prefix_end(rt.tkeys.messages)
    reverse = request.order == "desc"
    rows = await rt.read(
        lambda: rt.ctx.kv.scan(start, end, limit=request.limit * 2 + 10, reverse=reverse),
        "messages",
    )
    messages = [unpack(value) for _, value in rows]
    rendered = render_messages(
        messages[::-1] if reverse else messages, use_assistant_message=request.use_assistant_message
    )
    if reverse:
        rendered.reverse()
    return rendered[: request.limit]


async def update_block(rt: AgentRuntime, request: UpdateBlock) -> Block:
    agent = rt.require()
    await rt.refresh_blocks()
    current = rt.block_by_label(request.label)
    if current is None:
        raise BlockNotFoundError(
            f"agent {agent.id} has no block labelled {request.label!r} "
            f"(labels: {', '.join(b.label for b in rt.ordered_blocks()) or 'none'})"
        )
    if request.new_label is not None:
        check_label(request.new_label, "new label")

    async def build(txn: Transaction) -> Block:
        data = await txn.get(Keys.block(current.id))
        block: Block = unpack(data) if data is not None else current
        if request.new_label is not None and request.new_label != block.label:
            await _label_free(txn, agent, request.new_label, block.id)
        changes: dict[str, Any] = {"updated_at": rt.now()}
        for field in ("value", "limit", "description", "read_only", "metadata"):
            value = getattr(request, field)
            if value is not None:
                changes[field] = value
        if request.new_label is not None:
            changes["label"] = request.new_label
        new = attrs.evolve(block, **changes)
        if len(new.value) > new.limit:
            raise BlockLimitError(
                f"block {new.label!r}: value has {len(new.value)} characters, over its limit "
                f"{new.limit}"
            )
        await txn.set(Keys.block(new.id), pack(new))
        return new

    new = await rt.commit(build, f"block {request.label}")
    rt.blocks[new.id] = new
    return new


async def attach_block(rt: AgentRuntime, block_id: str) -> AgentView:
    agent = rt.require()
    if block_id in agent.block_ids:
        return await view(rt)
    new = attrs.evolve(agent, block_ids=(*agent.block_ids, block_id), updated_at=rt.now())

    async def build(txn: Transaction) -> Block:
        data = await txn.get(Keys.block(block_id))
        if data is None:
            raise BlockNotFoundError(f"block {block_id!r} not found")
        current: Block = unpack(data)
        await _label_free(txn, agent, current.label, block_id)
        await txn.set(rt.keys.agent, pack(new))
        return current

    rt.blocks[block_id] = await rt.commit(build, "the agent")
    rt.agent = new
    return await view(rt)


async def _label_free(txn: Transaction, agent: AgentRecord, label: str, block_id: str) -> None:
    """Refuse ``label`` if another of the agent's blocks has it (read in ``txn``, so a
    concurrent relabel of a shared block conflicts with this change instead of racing it)."""
    for other_id in agent.block_ids:
        if other_id == block_id:
            continue
        data = await txn.get(Keys.block(other_id))
        other: Block | None = unpack(data) if data is not None else None
        if other is not None and other.label == label:
            raise NameConflictError(
                f"agent {agent.id} already has a block labelled {label!r} ({other.id})"
            )


async def detach_block(rt: AgentRuntime, block_id: str) -> AgentView:
    agent = rt.require()
    if block_id not in agent.block_ids:
        raise BlockNotFoundError(f"block {block_id!r} is not attached to agent {agent.id}")
    new = attrs.evolve(
        agent, block_ids=tuple(b for b in agent.block_ids if b != block_id), updated_at=rt.now()
    )
    await rt.write([(rt.keys.agent, pack(new))], "the agent")
    rt.agent = new
    rt.blocks.pop(block_id, None)
    return await view(rt)


async def attach_tool(rt: AgentRuntime, tool_id: str) -> AgentView:
    agent = rt.require()
    if tool_id in agent.tool_ids:
        return await view(rt)
    spec = await _existing_tool(rt, tool_id)
    _check_tool(agent, spec, (await load_toolset(rt)).names)
    new = attrs.evolve(agent, tool_ids=(*agent.tool_ids, tool_id), updated_at=rt.now())
    await rt.write([(rt.keys.agent, pack(new))], "the agent")
    rt.agent = new
    return await view(rt)


async def detach_tool(rt: AgentRuntime, tool_id: str) -> AgentView:
    agent = rt.require()
    if tool_id not in agent.tool_ids:
        raise ToolNotFoundError(f"tool {tool_id!r} is not attached to agent {agent.id}")
    new = attrs.evolve(
        agent, tool_ids=tuple(t for t in agent.tool_ids if t != tool_id), updated_at=rt.now()
    )
    await rt.write([(rt.keys.agent, pack(new))], "the agent")
    rt.agent = new
    return await view(rt)
