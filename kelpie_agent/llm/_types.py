"""Values of the LLM port: requests, messages, tools, responses and stream chunks.

All are attrs frozen classes. Construction checks the shape (roles, block kinds, tool names)
and raises ``ValueError`` with a one-line message; rules only a provider can judge (a tool
result must answer a tool call of the previous turn, ...) are left to the provider, which
answers with :class:`~kelpie_agent.llm.LlmBadRequestError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

__all__ = [
    "STOP_REASONS",
    "SUMMARIZER_SYSTEM",
    "AssistantBlock",
    "ContentBlock",
    "LlmRequest",
    "LlmResponse",
    "Message",
    "StopReason",
    "StreamChunk",
    "StreamEnd",
    "TextBlock",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolResult",
    "Usage",
]

# The first line of the system prompt of a request that summarizes an agent's history (context
# compaction) rather than runs a step: it offers no tools, and simulated models tell it apart
# by this line.
SUMMARIZER_SYSTEM = (
    "You write summaries of an AI agent's conversation history; the summary replaces the "
    "evicted messages in the agent's context window."
)

StopReason: TypeAlias = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]
STOP_REASONS: tuple[str, ...] = StopReason.__args__  # type: ignore[attr-defined]
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _nonempty(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string, got {value!r}")


def _string(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{attribute.name} must be a string, got {type(value).__name__}")


@attrs.frozen
class TextBlock:
    """Text, from the user or the model."""

    text: str = attrs.field(validator=_string)


@attrs.frozen
class ToolCall:
    """The model calls a tool. ``arguments`` is the raw JSON text the model produced; it may be
    invalid JSON (a malformed call, or one cut off by ``max_tokens``), so read :attr:`input`."""

    id: str = attrs.field(validator=_nonempty)
    name: str = attrs.field(validator=_nonempty)
    arguments: str = attrs.field(default="{}", validator=_string)

    @property
    def input(self) -> dict[str, Any] | None:
        """The arguments as a JSON object, or ``None`` if they are not one."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    @classmethod
    def of(cls, id: str, name: str, input: Mapping[str, Any]) -> ToolCall:
        """A call whose arguments are ``input`` encoded as compact JSON."""
        return cls(id, name, json.dumps(dict(input), separators=(",", ":"), ensure_ascii=False))


@attrs.frozen
class ToolResult:
    """The result of a tool call, sent back in a user turn."""

    tool_call_id: str = attrs.field(validator=_nonempty)
    content: str = attrs.field(validator=_string)
    is_error: bool = False


AssistantBlock: TypeAlias = TextBlock | ToolCall
ContentBlock: TypeAlias = TextBlock | ToolCall | ToolResult
_ALLOWED: dict[str, tuple[type, ...]] = {
    "user": (TextBlock, ToolResult),
    "assistant": (TextBlock, ToolCall),
}


def _assistant_blocks(value: Iterable[AssistantBlock]) -> tuple[AssistantBlock, ...]:
    return tuple(value)


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(value)


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


def _content(value: Any) -> tuple[ContentBlock, ...]:
    if isinstance(value, str):
        return (TextBlock(value),)
    return tuple(value)


@attrs.frozen
class Message:
    """One turn of the conversation. Users send text and tool results; the assistant sends
    text and tool calls. A string ``content`` is one text block."""

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...] = attrs.field(converter=_content)

    def __attrs_post_init__(self) -> None:
        allowed = _ALLOWED.get(self.role)
        if allowed is None:
            raise ValueError(f"message role must be 'user' or 'assistant', got {self.role!r}")
        if not self.content:
            raise ValueError(f"a {self.role} message needs at least one content block")
        for block in self.content:
            if not isinstance(block, allowed):
                raise ValueError(
                    f"a {self.role} message cannot hold a {type(block).__name__} "
                    f"(allowed: {', '.join(t.__name__ for t in allowed)})"
                )

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (TextBlock(text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", (TextBlock(text),))

    @classmethod
    def tool_results(cls, *results: ToolResult) -> Message:
        return cls("user", results)

    @property
    def text(self) -> str:
        """The text blocks, joined."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


def _schema(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping) or value.get("type") != "object":
        raise ValueError(f"a tool's input_schema must be a JSON schema of type 'object': {value!r}")


@attrs.frozen
class Tool:
    """A tool offered to the model: its name, what it does, and a JSON schema of its input."""

    name: str = attrs.field()
    description: str = attrs.field(default="", validator=_string)
    input_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}, validator=_schema, hash=False
    )

    @name.validator
    def _check_name(self, _: attrs.Attribute[str], value: str) -> None:
        if not isinstance(value, str) or not TOOL_NAME.fullmatch(value):
            raise ValueError(f"tool names match {TOOL_NAME.pattern}, got {value!r}")


@attrs.frozen
class LlmRequest:
    """Everything one model call needs."""

    model: str = attrs.field(validator=_nonempty)
    messages: tuple[Message, ...] = attrs.field(converter=_messages)
    system: str = attrs.field(default="", validator=_string)
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    max_tokens: int = 1024

    def __attrs_post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise ValueError(f"max_tokens must be an int, got {self.max_tokens!r}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if not self.messages:
            raise ValueError("a request needs at least one message")
        if not all(isinstance(m, Message) for m in self.messages):
            raise ValueError("messages must be Message values")
        if self.messages[0].role != "user":
            raise ValueError("the first message must come from the user")
        names = [t.name for t in self.tools]
        if not all(isinstance(t, Tool) for t in self.tools):
            raise ValueError("tools must be Tool values")
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"tool names must be unique; repeated: {', '.join(dup)}")

    def tool(self, name: str) -> Tool | None:
        """The offered tool called ``name``, if any."""
        return next((t for t in self.tools if t.name == name), None)


@attrs.frozen
class Usage:
    """Tokens read and written by one call."""

    input_tokens: int = 0
    output_tokens: int = 0


@attrs.frozen
class LlmResponse:
    """What the model said: text and tool calls in order, why it stopped, and the usage."""

    id: str
    model: str
    content: tuple[AssistantBlock, ...] = attrs.field(converter=_assistant_blocks)
    stop_reason: str
    usage: Usage = Usage()

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCall))

    def to_message(self) -> Message:
        """The assistant turn to put back into the conversation (empty text blocks dropped,
        as providers reject them); ``ValueError`` if nothing is left."""
        blocks = tuple(b for b in self.content if not (isinstance(b, TextBlock) and not b.text))
        if not blocks:
            raise ValueError(f"response {self.id} has no content to put back into a conversation")
        return Message("assistant", blocks)


# -- stream chunks ------------------------------------------------------------------------------
# ``index`` is the content block's position in the final response; text and tool calls share it.


@attrs.frozen
class TextDelta:
    """More text for the text block at ``index`` (the first delta opens the block)."""

    index: int
    text: str


@attrs.frozen
class ToolCallStart:
    """The model starts calling tool ``name``; its block is at ``index``."""

    index: int
    id: str
    name: str


@attrs.frozen
class ToolCallDelta:
    """More of the JSON arguments of the tool call at ``index``."""

    index: int
    partial_json: str


@attrs.frozen
class StreamEnd:
    """The last chunk: why the model stopped, and the usage of the whole call."""

    id: str
    model: str
    stop_reason: str
    usage: Usage


StreamChunk: TypeAlias = TextDelta | ToolCallStart | ToolCallDelta | StreamEnd
