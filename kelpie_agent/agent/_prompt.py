"""Building the LLM request: system prompt, rendered memory blocks, recent history.

The system prompt is the agent's ``system`` with the memory blocks rendered into it (at
``{CORE_MEMORY}`` if present, else appended), then memory statistics and the time. History is
the recent stored messages turned back into Anthropic turns: a step's text and tool calls form
one assistant turn, its tool results (and a heartbeat, if any) the next user turn. The window
is cut from the front to fit the context window, and the cut is repaired so the request is
always valid: it starts with a user turn, every tool result answers a call just before it, and
tool blocks become text when no tools are offered.
"""

from __future__ import annotations

from collections.abc import Sequence

from kelpie_agent.llm import ContentBlock, Message, TextBlock, Tool, ToolCall, ToolResult

from ._messages import (
    AgentMessage,
    ApprovalResponseMessage,
    AssistantMessage,
    ReasoningMessage,
    SystemMessage,
    ToolCallMessage,
    UserMessage,
)
from ._models import AgentRecord, Block
from ._tool_rules import RULE_PROMPT_DESCRIPTION, rule_prompt

__all__ = [
    "DEFAULT_SYSTEM",
    "build_messages",
    "message_size",
    "render_memory",
    "rules_block",
    "system_prompt",
]

MEMORY_KEYWORD = "{CORE_MEMORY}"
TRIMMED = "[Earlier messages were trimmed from the context window.]"
DEFAULT_SYSTEM = {
    "memgpt_agent": (
        "You are a helpful assistant with a persistent memory. You think privately; the user "
        "only sees what you send with send_message. Edit your core memory with the memory "
        "tools when you learn something worth keeping. Set request_heartbeat to true to keep "
        "working after a tool call."
    ),
    "letta_v1_agent": (
        "You are a helpful assistant with a persistent memory. Reply to the user in plain text. "
        "Use your memory tools to remember what matters; call tools as needed before replying."
    ),
    "react_agent": (
        "You are a helpful assistant. Think step by step, call tools when they help, and give "
        "the user your final answer in plain text."
    ),
}


def render_memory(blocks: Sequence[Block]) -> str:
    """The memory blocks as Letta renders them into the system prompt."""
    parts = [
        "<memory_blocks>",
        "The following memory blocks are currently engaged in your core memory unit:",
        "",
    ]
    for block in blocks:
        parts += [f"<{block.label}>", "<description>", block.description, "</description>"]
        parts += [
            "<metadata>",
            f"- chars_current={block.chars}",
            f"- chars_limit={block.limit}",
            f"- read_only={'true' if block.read_only else 'false'}",
            "</metadata>",
            "<value>",
            block.value,
            "</value>",
            f"</{block.label}>",
            "",
        ]
    parts.append("</memory_blocks>")
    return "\n".join(parts)


def rules_block(agent: AgentRecord) -> list[Block]:
    """Letta's ephemeral ``tool_usage_rules`` block (the rules' prompts), if any rule has one.
    It is rendered with the memory blocks but never stored."""
    value = rule_prompt(agent.tool_rules)
    if value is None:
        return []
    return [
        Block(
            id="tool-usage-rules",
            label="tool_usage_rules",
            value=value,
            limit=max(len(value), 1),
            description=RULE_PROMPT_DESCRIPTION,
            read_only=True,
        )
    ]


def system_prompt(
    agent: AgentRecord,
    blocks: Sequence[Block],
    *,
    now: str,
    messages: int,
    passages: int | None,
    directories: str | None = None,
) -> str:
    """``directories``: Letta's attached-folders section, rendered after the memory blocks."""
    base = agent.system or DEFAULT_SYSTEM.get(agent.agent_type, "")
    memory = render_memory(blocks)
    if directories:
        memory = f"{memory}\n\n{directories}"
    text = base.replace(MEMORY_KEYWORD, memory) if MEMORY_KEYWORD in base else f"{base}\n\n{memory}"
    stats = [
        "<memory_metadata>",
        f"- The current time is: {now}",
        f"- {messages} previous messages between you and the user are stored in recall memory "
        "(use tools to access them)",
    ]
    if passages is not None:
        stats.append(
            f"- {passages} total memories you created are stored in archival memory (use tools "
            "to access them)"
        )
    stats.append("</memory_metadata>")
    return text.strip() + "\n\n" + "\n".join(stats)


FOLLOWS = "+"  # a heartbeat joins the user turn before it (the step's tool results)
Turn = tuple[str, str, list[ContentBlock]]  # role, group (the step, else the message), blocks


def _blocks(message: AgentMessage) -> tuple[str, list[ContentBlock]]:
    """The role and content blocks of one stored message."""
    if isinstance(message, UserMessage | SystemMessage):
        return "user", [TextBlock(message.content)]
    if isinstance(message, AssistantMessage):
        return "assistant", [TextBlock(message.content)]
    if isinstance(message, ReasoningMessage):
        return "assistant", [TextBlock(message.reasoning)]
    if isinstance(message, ToolCallMessage):
        call = message.tool_call
        return "assistant", [ToolCall(call.tool_call_id, call.name or "unknown", call.arguments)]
    if isinstance(message, ApprovalResponseMessage):  # the calls' results speak for it
        return "user", []
    return "user", [
        ToolResult(message.tool_call_id, message.tool_return, message.status == "error")
    ]


def _turn(message: AgentMessage) -> Turn:
    role, blocks = _blocks(message)
    if isinstance(message, UserMessage) and message.kind == "heartbeat":
        return role, FOLLOWS, blocks
    if isinstance(message, ToolCallMessage) and message.step_id is None:
        return role, FOLLOWS, blocks  # a call outside a step (the boot call) joins its thought
    return role, message.step_id or message.id, blocks


def _as_text(block: ContentBlock) -> ContentBlock:
    if isinstance(block, ToolCall):
        return TextBlock(f"[called {block.name} with {block.arguments}]")
    if isinstance(block, ToolResult):
        return TextBlock(f"[result of {block.tool_call_id}: {block.content}]")
    return block


def _merge(turns: list[Turn]) -> list[Turn]:
    """One turn per step and role (a step's text and calls; its tool results, with the
    heartbeat that follows them); every other message is a turn of its own (the API accepts
    consecutive user turns, and a new input stays distinct from the results before it)."""
    out: list[Turn] = []
    for role, group, blocks in turns:
        blocks = [b for b in blocks if not (isinstance(b, TextBlock) and not b.text.strip())]
        if not blocks:
            continue
        if out and out[-1][0] == role and (out[-1][1] == group or group == FOLLOWS):
            group = out[-1][1]
            merged = out[-1][2] + blocks
            if role == "user":  # tool results must come first in a user turn
                merged.sort(key=lambda b: not isinstance(b, ToolResult))
            out[-1] = (role, group, merged)
        else:
            out.append((role, group, blocks))
    return out


def _repair(turns: list[Turn], with_tools: bool) -> list[Turn]:
    """Make tool blocks pair up (or become text) so the provider accepts the request."""
    fixed: list[Turn] = []
    for i, (role, group, blocks) in enumerate(turns):
        if not with_tools:
            fixed.append((role, group, [_as_text(b) for b in blocks]))
            continue
        if role == "assistant":
            after = turns[i + 1][2] if i + 1 < len(turns) and turns[i + 1][0] == "user" else []
            answered = {b.tool_call_id for b in after if isinstance(b, ToolResult)}
            kept = [
                b if not isinstance(b, ToolCall) or b.id in answered else _as_text(b)
                for b in blocks
            ]
        else:
            before = turns[i - 1][2] if i > 0 and turns[i - 1][0] == "assistant" else []
            calls = {b.id for b in before if isinstance(b, ToolCall)}
            kept = [
                b if not isinstance(b, ToolResult) or b.tool_call_id in calls else _as_text(b)
                for b in blocks
            ]
            kept.sort(key=lambda b: not isinstance(b, ToolResult))  # results come first
        fixed.append((role, group, kept))
    return _merge(fixed)


def message_size(message: AgentMessage) -> int:
    """Characters one stored message takes in a prompt (roughly)."""
    _, blocks = _blocks(message)
    total = 16
    for block in blocks:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, ToolCall):
            total += len(block.name) + len(block.arguments)
        else:
            total += len(block.content)
    return total


def build_messages(
    history: Sequence[AgentMessage], *, budget_chars: int, tools: Sequence[Tool]
) -> list[Message]:
    """The conversation for the LLM from the most recent messages that fit ``budget_chars``."""
    kept: list[AgentMessage] = []
    used = 0
    for message in reversed(history):
        size = message_size(message)
        if kept and used + size > budget_chars:
            break
        kept.append(message)
        used += size
    kept.reverse()
    trimmed = len(kept) < len(history)
    turns = _repair(_merge([_turn(m) for m in kept]), with_tools=bool(tools))
    # A window that was cut may start in the middle of a tool loop: start at a plain user turn
    # if there is one, else with a note.
    if trimmed:
        start = next(
            (
                i
                for i, (role, _, blocks) in enumerate(turns)
                if role == "user" and not any(isinstance(b, ToolResult) for b in blocks)
            ),
            None,
        )
        if start is not None:
            turns = turns[start:]
    if not turns or turns[0][0] != "user":
        note = TRIMMED if trimmed else "(no messages yet)"
        turns = [("user", "-", [TextBlock(note)]), *turns]
    turns = _repair(turns, with_tools=bool(tools))
    return [Message(role, tuple(blocks)) for role, _, blocks in turns]  # type: ignore[arg-type]
