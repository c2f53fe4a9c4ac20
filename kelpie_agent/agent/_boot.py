"""A thread's first messages, as Letta stores them, and the stored system message after that.

Letta stores an agent's compiled system prompt as message 0 of its history, then (for every
agent type but ``letta_v1_agent`` and ``sleeptime_agent``) a boot exchange: a
``send_message`` call with its inner thought, its return, and a login event
(``initialize_message_sequence_async`` in letta-ai/letta). A supplied
``initial_message_sequence`` replaces everything after the system message. Each conversation
gets its own system message when it is created (a fork a fresh one).

The stored system message is a :class:`SystemMessage` of kind ``prompt``. It is listed (first)
but never sent to the model as a turn: every step compiles the system prompt afresh
(``_loop._system``), and compaction never evicts it (``_compaction.context_body`` leaves it
out). Like Letta's ``rebuild_system_prompt_async``, it is rewritten in place (same id, same
position) when the memory it shows changed (checked before each step), on ``recompile`` and
on ``reset-messages``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from ._codec import pack, unpack
from ._messages import (
    AgentMessage,
    ReasoningMessage,
    SystemMessage,
    ToolCallInfo,
    ToolCallMessage,
    ToolReturnMessage,
    UserMessage,
)
from ._models import AgentRecord, Block
from ._prompt import render_memory, rules_block, system_prompt
from ._requests import CreateAgent, InputMessage
from ._runtime import AgentRuntime, format_time

__all__ = [
    "BOOT_ARGUMENTS",
    "BOOT_MESSAGE",
    "BOOT_THOUGHT",
    "boot_messages",
    "creation_prompt",
    "first_messages",
    "is_prompt",
    "prompt_message",
    "refresh_prompt",
    "stored_prompt",
]

BOOT_THOUGHT = "Bootup sequence complete. Persona activated. Testing messaging functionality."
BOOT_MESSAGE = "More human than human is our motto."
BOOT_ARGUMENTS = json.dumps({"message": BOOT_MESSAGE}, indent=2)  # Letta's text, as is
# Agent types whose default sequence is the system message alone (Letta's letta_v1_agent;
# its sleeptime_agent would have the login event, but Kelpie has no sleeptime agents).
_PROMPT_ONLY = frozenset({"letta_v1_agent"})


def is_prompt(message: AgentMessage) -> bool:
    """Whether ``message`` is a thread's stored system prompt (not a system input)."""
    return isinstance(message, SystemMessage) and message.kind == "prompt"


def creation_prompt(
    agent: AgentRecord, blocks: Sequence[Block], tool_names: Sequence[str], now: float
) -> str:
    """The compiled system prompt of a new agent: its memory, no messages, no memories."""
    archival = any(name.startswith("archival_") for name in tool_names)
    return system_prompt(
        agent,
        [*blocks, *rules_block(agent)],
        now=format_time(now, agent.timezone),
        messages=0,
        passages=0 if archival else None,
    )


def prompt_message(rt: AgentRuntime, content: str) -> SystemMessage:
    """A new stored system prompt at the current thread's next position."""
    return SystemMessage(
        id=rt.new_id("message"), date=rt.now(), seq=rt.alloc_seq(), content=content, kind="prompt"
    )


def boot_messages(rt: AgentRuntime, agent: AgentRecord) -> list[AgentMessage]:
    """Letta's default messages after the system prompt for ``agent``'s type: none for a
    letta_v1_agent; else the boot ``send_message`` (its thought and call, then its return)
    and the login event."""
    if agent.agent_type in _PROMPT_ONLY:
        return []
    now = rt.now()
    time = format_time(now, agent.timezone)
    call_id = rt.new_id("toolu")
    thought, call, done, login = (rt.new_id("message") for _ in range(4))
    returned = json.dumps({"status": "OK", "message": None, "time": time}, ensure_ascii=False)
    return [
        ReasoningMessage(id=thought, date=now, seq=rt.alloc_seq(), reasoning=BOOT_THOUGHT),
        ToolCallMessage(
            id=call,
            date=now,
            seq=rt.alloc_seq(),
            tool_call=ToolCallInfo("send_message", BOOT_ARGUMENTS, call_id),
        ),
        ToolReturnMessage(
            id=done,
            date=now,
            seq=rt.alloc_seq(),
            name="send_message",
            tool_return=returned,
            status="success",
            tool_call_id=call_id,
        ),
        UserMessage(
            id=login,
            date=now,
            seq=rt.alloc_seq(),
            content=json.dumps(
                {"type": "login", "last_login": "Never (first login)", "time": time},
                ensure_ascii=False,
            ),
            kind="login",
        ),
    ]


def first_messages(
    rt: AgentRuntime,
    request: CreateAgent,
    agent: AgentRecord,
    blocks: list[Block],
    tool_names: list[str],
) -> list[AgentMessage]:
    """The new agent's first messages, committed with it (``_boot``): an imported history
    as it is (its system message kept as the stored prompt, one compiled if it has none);
    else the compiled system prompt, then ``initial_messages`` if given, else Letta's
    default sequence for the agent type."""
    from ._af_messages import materialize

    prompt: list[AgentMessage] = []
    if not request.imported or request.imported[0].kind is not SystemMessage:
        compiled = creation_prompt(agent, blocks, tool_names, rt.now())
        prompt.append(prompt_message(rt, compiled))
    if request.imported:
        imported = materialize(request.imported, rt.new_id, rt.next_seq, {})
        rt.thread.next_seq += len(imported)
        first = imported[0]
        if not prompt and isinstance(first, SystemMessage):  # the file's is the stored prompt
            imported[0] = attrs.evolve(first, kind="prompt")
        return [*prompt, *imported]
    if request.initial_messages is not None:
        return [*prompt, *(_given(rt, m) for m in request.initial_messages)]
    return [*prompt, *boot_messages(rt, agent)]


def _given(rt: AgentRuntime, message: InputMessage) -> AgentMessage:
    from ._session import _input

    return attrs.evolve(_input(rt, message, ""), run_id=None)


async def stored_prompt(rt: AgentRuntime) -> SystemMessage | None:
    """The current thread's stored system prompt (its first message), if it has one."""
    history = rt.history
    if history and history[0].seq == 1:
        first: AgentMessage = history[0]
    else:
        rows = await rt.read(
            lambda: rt.ctx.kv.scan_prefix(rt.tkeys.messages, limit=1), "the system message"
        )
        if not rows:
            return None
        first = unpack(rows[0][1])
    return first if isinstance(first, SystemMessage) and is_prompt(first) else None


async def refresh_prompt(
    rt: AgentRuntime, compiled: str, blocks: Sequence[Block], *, force: bool
) -> str:
    """Rewrite the thread's stored system prompt in place with ``compiled`` (Letta's
    ``rebuild_system_prompt_async``): when ``force``d and it differs, or when the memory it
    shows (``blocks`` rendered) is no longer in it. Returns the stored prompt afterwards
    (``compiled`` if the thread has none)."""
    current = await stored_prompt(rt)
    if current is None:
        return compiled
    changed = current.content != compiled
    stale = render_memory(blocks) not in current.content
    if not changed or not (force or stale):
        return current.content
    new = attrs.evolve(current, content=compiled)
    await rt.write([(rt.tkeys.message(new.seq), pack(new))], "the system message")
    history = rt.history
    for i, message in enumerate(history):
        if message.seq == new.seq:
            history[i] = new
            break
    return compiled
