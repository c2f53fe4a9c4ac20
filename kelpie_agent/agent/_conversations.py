"""Conversations: more threads of history on one agent, sharing its memory (Letta's
conversations; docs/conversations.md).

Each conversation is a *thread*: its own messages, run checkpoint, otid records and context
window, stored under the conversation's id (``msg/<conv>/…``, ``session/<conv>``,
``context/<conv>``; ``_codec``), while the memory blocks, tools and archival memory are the
agent's. All threads of an agent live in its actor: runs of different threads take turns, and
one writer decides every change to the agent's memory whichever thread asks.

The records: ``conv/<conv>`` (:class:`ConversationRecord`) and the agent's index
``convs/<agent>/<µs>/<conv>``, written together. Deleting a conversation deletes its thread
(messages, checkpoint, context) with it; its runs and steps stay, as the agent's do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._boot import is_prompt
from ._codec import Keys, pack, register, unpack
from ._errors import InvalidRequestError, ResourceNotFoundError
from ._messages import AgentMessage

if TYPE_CHECKING:
    from ._runtime import AgentRuntime

__all__ = [
    "UPDATABLE_CONVERSATION_FIELDS",
    "ConversationRecord",
    "CreateConversation",
    "DeleteConversation",
    "ForkConversation",
    "UpdateConversation",
    "create_conversation",
    "delete_all_conversations",
    "delete_conversation",
    "fork_conversation",
    "load_conversation",
    "resume_conversations",
    "update_conversation",
]

UPDATABLE_CONVERSATION_FIELDS = ("summary", "description", "archived", "last_message_at")
_BATCH = 200


@attrs.frozen
class ConversationRecord:
    """A conversation of ``agent_id`` (times are Clock-port epoch seconds)."""

    id: str
    agent_id: str
    summary: str | None = None
    description: str | None = None
    archived: bool = False
    archived_at: float | None = None
    hidden: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0
    last_message_at: float | None = None  # the latest input sent to it
    forked_from: str | None = None  # the thread it was forked from (a conversation or agent)


register("conversation", ConversationRecord)


@attrs.frozen
class CreateConversation:
    """A new conversation of the agent -> :class:`ConversationRecord`."""

    summary: str | None = None
    description: str | None = None
    hidden: bool = False


@attrs.frozen
class UpdateConversation:
    """Change fields of :data:`UPDATABLE_CONVERSATION_FIELDS` -> :class:`ConversationRecord`."""

    conversation_id: str
    changes: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen
class DeleteConversation:
    """Delete a conversation and its thread -> None."""

    conversation_id: str


@attrs.frozen
class ForkConversation:
    """A new conversation with a copy of a thread's history (``source`` None: the agent's
    own), up to and including ``message_id`` if given -> :class:`ConversationRecord`."""

    source: str | None = None
    message_id: str | None = None
    hidden: bool = False


async def load_conversation(rt: AgentRuntime, conversation_id: str) -> ConversationRecord:
    """Conversation ``conversation_id`` of this agent, or ``ResourceNotFoundError``."""
    try:
        key = Keys.conversation(conversation_id)
    except ValueError:
        raise ResourceNotFoundError("conversation", conversation_id) from None
    data = await rt.get(key, f"conversation {conversation_id}")
    record: ConversationRecord | None = unpack(data) if data is not None else None
    if record is None or record.agent_id != rt.agent_id:
        raise ResourceNotFoundError(
            "conversation",
            conversation_id,
            f"conversation {conversation_id!r} not found on agent {rt.agent_id}",
        )
    return record


def _record_writes(rt: AgentRuntime, record: ConversationRecord) -> list[tuple[bytes, bytes]]:
    index = rt.keys.conversation_index(record.created_at, record.id)
    return [(Keys.conversation(record.id), pack(record)), (index, b"")]


def _remember(rt: AgentRuntime, record: ConversationRecord) -> None:
    thread = rt.threads.get(record.id)
    if thread is not None:
        thread.conversation = record


async def create_conversation(rt: AgentRuntime, request: CreateConversation) -> ConversationRecord:
    rt.require()
    now = rt.now()
    record = ConversationRecord(
        id=rt.new_id("conv"),
        agent_id=rt.agent_id,
        summary=request.summary,
        description=request.description,
        hidden=request.hidden,
        created_at=now,
        updated_at=now,
    )
    prompt = await _new_prompt(rt, record.id, 1)
    await rt.write([*prompt, *_record_writes(rt, record)], "the new conversation")
    return record


async def _new_prompt(rt: AgentRuntime, thread_id: str, seq: int) -> list[tuple[bytes, bytes]]:
    """The writes of a new thread's stored system message at ``seq``, compiled from the
    agent's memory now (Letta compiles one for each new conversation, and a fork's own)."""
    from ._loop import compiled_system
    from ._messages import SystemMessage

    content = await compiled_system(rt)
    message = SystemMessage(
        id=rt.new_id("message"), date=rt.now(), seq=seq, content=content, kind="prompt"
    )
    keys = Keys(thread_id)
    return [(keys.message(seq), pack(message)), (keys.message_id(message.id), pack(seq))]


async def update_conversation(rt: AgentRuntime, request: UpdateConversation) -> ConversationRecord:
    rt.require()
    record = await load_conversation(rt, request.conversation_id)
    unknown = sorted(set(request.changes) - set(UPDATABLE_CONVERSATION_FIELDS))
    if unknown:
        raise InvalidRequestError(f"{unknown[0]}: not a field a conversation update can change")
    changes = dict(request.changes)
    if "archived" in changes and bool(changes["archived"]) != record.archived:
        changes["archived_at"] = rt.now() if changes["archived"] else None
    new = attrs.evolve(record, **changes, updated_at=rt.now())
    await rt.write([(Keys.conversation(new.id), pack(new))], "the conversation")
    _remember(rt, new)
    return new


def touch_writes(rt: AgentRuntime, now: float) -> list[tuple[bytes, bytes]]:
    """The current conversation's record with ``last_message_at`` = ``now`` (a new input),
    committed with the input; nothing in the agent's own history."""
    record = rt.thread.conversation
    if rt.conversation_id is None or record is None:
        return []
    new = attrs.evolve(record, last_message_at=now)
    rt.thread.conversation = new  # only the input's commit writes it; a failed one reloads
    return [(Keys.conversation(new.id), pack(new))]


async def _delete_thread(rt: AgentRuntime, thread_id: str) -> None:
    """Every key of a thread's history (messages, their ids, otids, checkpoint, context)."""
    keys = Keys(thread_id)
    doomed = [keys.session, keys.context]
    for prefix in (keys.messages, keys.message_ids, keys.otids):
        doomed += [key for key, _ in await rt.scan_all(prefix, "the conversation's history")]
    for start in range(0, len(doomed), _BATCH):
        await rt.write([(key, None) for key in doomed[start : start + _BATCH]], "the history")


async def delete_conversation(rt: AgentRuntime, request: DeleteConversation) -> None:
    """The record goes first (the conversation is gone for every reader), then its thread;
    a crash in between leaves keys no request can reach (not collected yet: Dconv-3)."""
    rt.require()
    record = await load_conversation(rt, request.conversation_id)
    index = rt.keys.conversation_index(record.created_at, record.id)
    marker = rt.keys.open_run(record.id)
    await rt.write(
        [(Keys.conversation(record.id), None), (index, None), (marker, None)],
        "the conversation",
    )
    rt.forget_thread(record.id)
    await _delete_thread(rt, record.id)


async def delete_all_conversations(rt: AgentRuntime) -> None:
    """An agent's deletion: every conversation and its thread."""
    for key, _ in await rt.scan_all(rt.keys.conversations, "the agent's conversations"):
        conv = key.rsplit(b"/", 1)[1].decode()
        await rt.write(
            [(Keys.conversation(conv), None), (key, None), (rt.keys.open_run(conv), None)],
            "the conversation",
        )
        rt.forget_thread(conv)
        await _delete_thread(rt, conv)


async def fork_conversation(rt: AgentRuntime, request: ForkConversation) -> ConversationRecord:
    """Copy the source thread's history (up to ``message_id``) into a new conversation.

    The copies keep their positions (``seq``) and get new ids, so a message id names one
    message in one thread; the context window is copied too (the fork's prompt is the
    source's). A run still open in the source is not: the fork has no run. The record is
    written last, with the last batch: a crash before leaves only unreachable keys."""
    rt.require()
    thread = await rt.enter(request.source)
    rows = await rt.scan_all(thread.keys.messages, "the history to fork")
    messages: list[AgentMessage] = [unpack(value) for _, value in rows]
    if request.message_id is not None:
        cut = next((i for i, m in enumerate(messages) if m.id == request.message_id), None)
        if cut is None:
            raise ResourceNotFoundError(
                "message", request.message_id, f"message_id: {request.message_id!r} is not in it"
            )
        messages = messages[: cut + 1]
    now = rt.now()
    record = ConversationRecord(
        id=rt.new_id("conv"),
        agent_id=rt.agent_id,
        hidden=request.hidden,
        created_at=now,
        updated_at=now,
        last_message_at=thread.conversation.last_message_at if thread.conversation else None,
        forked_from=thread.id,
    )
    keys = Keys(record.id)
    renamed: dict[str, str] = {}
    writes: list[tuple[bytes, bytes | None]] = []
    for message in messages:
        if is_prompt(message):  # the fork gets its own, compiled now
            writes += await _new_prompt(rt, record.id, message.seq)
            continue
        copy = attrs.evolve(message, id=rt.new_id("message"))
        renamed[message.id] = copy.id
        writes += [(keys.message(copy.seq), pack(copy)), (keys.message_id(copy.id), pack(copy.seq))]
    context = thread.context
    last = messages[-1].seq if messages else 0
    if context.summary is not None and context.summary.seq <= last:
        summary = attrs.evolve(context.summary, id=renamed.get(context.summary.id, ""))
        writes.append((keys.context, pack(attrs.evolve(context, summary=summary))))
    batches = [writes[i : i + _BATCH] for i in range(0, len(writes), _BATCH)] or [[]]
    for batch in batches[:-1]:
        await rt.write(batch, "the forked history")
    await rt.write([*batches[-1], *_record_writes(rt, record)], "the forked conversation")
    return record


async def resume_conversations(
    rt: AgentRuntime, resume: Callable[[AgentRuntime], Awaitable[object]]
) -> None:
    """Finish the runs a crash interrupted in the agent's conversations (their markers say
    ``1``), in the order of the conversations' ids; a deleted one is skipped."""
    try:
        rows = await rt.scan_all(rt.keys.open_runs, "the conversations' open runs")
        for key, value in rows:
            if value != b"1":
                continue
            try:
                await rt.enter(key.rsplit(b"/", 1)[1].decode())
            except ResourceNotFoundError:
                continue
            await resume(rt)
    finally:
        rt.thread = rt.default
