"""What a SimLLM policy sees (the latest turn) and says (a reply of text and tool calls)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Literal, Protocol, TypeAlias

import attrs

from kelpie_agent.llm import LlmRequest, Message, TextBlock, ToolCall, ToolResult

__all__ = ["Call", "Policy", "Reply", "Turn", "latest_turn", "tool_name_of"]


@attrs.frozen
class Call:
    """A tool call in a policy's reply: the tool's name and its JSON arguments.

    ``id``: the call's id (the engine makes one when None); ``raw``: the exact argument text
    to send instead of ``input`` encoded as JSON (a policy that answers with broken JSON)."""

    name: str
    input: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    id: str | None = None
    raw: str | None = None


Reply: TypeAlias = tuple[str | Call, ...]
"""A policy's answer, in order: strings are text blocks, :class:`Call` s are tool calls."""


class Policy(Protocol):
    """A deterministic model: the same request and the same rng draws give the same reply."""

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        """The answer to ``request``; draw any randomness from ``rng`` only."""
        ...


@attrs.frozen
class Turn:
    """The latest turn of a conversation: the user's text, or the last tool result."""

    kind: Literal["user", "tool_result"]
    text: str
    tool: str | None = None  # for a tool result: the name of the tool that produced it
    is_error: bool = False


def tool_name_of(messages: tuple[Message, ...], call_id: str) -> str | None:
    """The name of the tool call ``call_id`` in ``messages``, if there is one."""
    for message in reversed(messages):
        for block in message.content:
            if isinstance(block, ToolCall) and block.id == call_id:
                return block.name
    return None


def latest_turn(request: LlmRequest) -> Turn:
    """The last user-role message, as a :class:`Turn`."""
    messages = request.messages
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role != "user":
            continue
        results = [b for b in message.content if isinstance(b, ToolResult)]
        if results:
            last = results[-1]
            name = tool_name_of(messages[:position], last.tool_call_id)
            return Turn("tool_result", last.content, name, last.is_error)
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        return Turn("user", text)
    raise AssertionError("a request always starts with a user message")
