"""The agent's persistent state as attrs frozen values: agent, blocks, tools, passages.

Times are epoch seconds (UTC) from the Clock port; ids come from the Ids port. The HTTP layer
renders these directly into Letta's JSON shapes (docs/agent.md, "State").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ._errors import InvalidRequestError
from ._tool_rules import TOOL_RULE_TYPES, ToolRule

__all__ = [
    "AGENT_TYPES",
    "DEFAULT_BLOCK_LIMIT",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_RETURN_CHAR_LIMIT",
    "TOOL_RULE_TYPES",
    "AgentRecord",
    "AgentType",
    "Block",
    "PassageRecord",
    "ToolRule",
    "ToolSpec",
    "check_id",
    "check_label",
]

AgentType: TypeAlias = Literal["memgpt_agent", "letta_v1_agent", "react_agent"]
AGENT_TYPES: tuple[str, ...] = ("memgpt_agent", "letta_v1_agent", "react_agent")
DEFAULT_BLOCK_LIMIT = 20_000  # Letta's CORE_MEMORY_BLOCK_CHAR_LIMIT
DEFAULT_CONTEXT_WINDOW = 32_000  # tokens, Letta's DEFAULT_CONTEXT_WINDOW
# The model of an agent created without one: the newest Sonnet the pinned anthropic SDK lists
# and does not deprecate (tests/agent/test_default_model.py checks that; docs/decisions.md).
DEFAULT_MODEL = "anthropic/claude-sonnet-5-5"
DEFAULT_RETURN_CHAR_LIMIT = 50_000  # Letta's FUNCTION_RETURN_CHAR_LIMIT
# Whole-string patterns (fullmatch: "$" alone would let a trailing newline through); the API
# states the same strings in its OpenAPI schema.
LABEL_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"
ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}$"
_LABEL = re.compile(LABEL_PATTERN)
_ID = re.compile(ID_PATTERN)
DEFAULT_MAX_FILES_OPEN = 5  # Letta's default for a 32k context window
DEFAULT_FILE_WINDOW = 15_000  # characters of one open file shown (Letta, 32k window)


def check_label(label: object, where: str = "label") -> str:
    """A block label: 1-100 of letters, digits, ``_ . -`` (not starting with ``.`` or ``-``)."""
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise InvalidRequestError(
            f"{where}: a block label is 1-100 letters, digits, '_', '.' or '-', got {label!r}"
        )
    return label


def check_id(value: object, what: str) -> str:
    """An id usable inside storage keys (no ``/``, no spaces)."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidRequestError(f"{what}: not a valid id: {value!r}")
    return value


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise InvalidRequestError(f"expected a list of strings, got the string {value!r}")
    out = tuple(value)
    for item in out:
        if not isinstance(item, str):
            raise InvalidRequestError(f"expected strings, got {item!r}")
    return out


def _mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


def _rules(value: Iterable[ToolRule]) -> tuple[ToolRule, ...]:
    return tuple(value)


@attrs.frozen
class Block:
    """A memory block. Blocks live on their own (``block/<id>``) and can be attached to
    several agents; an agent addresses its blocks by label, which is unique per agent."""

    id: str
    label: str
    value: str = ""
    limit: int = DEFAULT_BLOCK_LIMIT
    description: str = ""
    read_only: bool = False
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    created_at: float = 0.0
    updated_at: float = 0.0

    def __attrs_post_init__(self) -> None:
        check_label(self.label, "block label")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise InvalidRequestError(f"block {self.label!r}: limit must be an int >= 1")
        if not isinstance(self.value, str):
            raise InvalidRequestError(f"block {self.label!r}: value must be a string")

    @property
    def chars(self) -> int:
        return len(self.value)


@attrs.frozen
class ToolSpec:
    """A tool as stored (``tool/<id>``) and shown by the API (Letta's Tool).

    ``json_schema`` is Letta's shape: ``{"name", "description", "parameters": {object schema}}``.
    ``tool_type`` is ``letta_core``, ``letta_memory_core``, ``letta_sleeptime_core``,
    ``letta_builtin`` (built-ins), ``custom`` (source code run in the sandbox) or
    ``external_mcp`` (``mcp_server`` names the configured server).
    """

    id: str
    name: str
    description: str
    json_schema: Mapping[str, Any] = attrs.field(converter=_mapping, hash=False)
    tool_type: str = "custom"
    source_code: str | None = None
    tags: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    return_char_limit: int = DEFAULT_RETURN_CHAR_LIMIT
    mcp_server: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    created_at: float = 0.0
    updated_at: float = 0.0
    default_requires_approval: bool = False  # every call waits for a client's approval

    @property
    def parameters(self) -> Mapping[str, Any]:
        params = self.json_schema.get("parameters")
        return params if isinstance(params, Mapping) else {"type": "object", "properties": {}}


@attrs.frozen
class AgentRecord:
    """An agent's metadata (``agent/<id>``). Blocks and tools are referenced by id."""

    id: str
    name: str
    agent_type: str = "letta_v1_agent"
    system: str = ""
    model: str = DEFAULT_MODEL
    embedding: str | None = None
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_tokens: int = 4096
    description: str = ""
    tags: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    block_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    tool_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    tool_rules: tuple[ToolRule, ...] = attrs.field(default=(), converter=_rules)
    timezone: str = "UTC"
    created_at: float = 0.0
    updated_at: float = 0.0
    identity_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    folder_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)  # attached folders
    archive_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)  # shared archives
    max_files_open: int = DEFAULT_MAX_FILES_OPEN
    per_file_view_window_char_limit: int = DEFAULT_FILE_WINDOW

    def __attrs_post_init__(self) -> None:
        if self.agent_type not in AGENT_TYPES:
            raise InvalidRequestError(
                f"agent_type must be one of {', '.join(AGENT_TYPES)}, got {self.agent_type!r}"
            )
        if not isinstance(self.name, str) or not self.name:
            raise InvalidRequestError("name must be a non-empty string")
        if not isinstance(self.model, str) or not self.model:
            raise InvalidRequestError("model must be a non-empty string")
        for field, low in (
            ("context_window", 256),
            ("max_tokens", 1),
            ("max_files_open", 1),
            ("per_file_view_window_char_limit", 1),
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidRequestError(f"{field} must be an int >= {low}, got {value!r}")

    @property
    def llm_model(self) -> str:
        """The model name the provider wants: ``anthropic/claude-x`` -> ``claude-x``."""
        return self.model.split("/", 1)[1] if "/" in self.model else self.model


@attrs.frozen
class PassageRecord:
    """An archival passage with its embedding (``passage/<agent>/<seq>``).

    ``vector`` is stored as little-endian float64 bytes; ``embedder`` names the embedder that
    made it (vectors from another embedder are re-embedded on load).
    """

    id: str
    seq: int
    text: str
    vector: bytes = attrs.field(repr=False)
    embedder: str = ""
    tags: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    created_at: float = 0.0
    archive_id: str | None = None  # a shared archive's passage (else the agent's own)
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
