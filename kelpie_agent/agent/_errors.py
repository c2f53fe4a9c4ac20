"""Errors of the agent layer: typed, one line each, under :class:`AgentError`.

The HTTP layer maps them to status codes (``AgentNotFoundError`` -> 404,
``InvalidRequestError`` and its subclasses -> 400/422, ``AgentStorageError`` -> 503).
"""

from __future__ import annotations

from kelpie_agent.errors import KelpieError

__all__ = [
    "AgentError",
    "AgentExistsError",
    "AgentNotFoundError",
    "AgentStorageError",
    "BlockLimitError",
    "BlockNotFoundError",
    "InvalidRequestError",
    "NameConflictError",
    "PassageNotFoundError",
    "SessionError",
    "ToolDefinitionError",
    "ToolNotFoundError",
]


class AgentError(KelpieError):
    """Root of the agent layer's errors."""


class AgentNotFoundError(AgentError, LookupError):
    """No agent with this id (never created, or deleted)."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"agent {agent_id!r} not found")
        self.agent_id = agent_id


class AgentExistsError(AgentError):
    """The agent was already created."""


class NameConflictError(AgentError):
    """A name or label is already taken: a tool's name among the tools, a block's label among
    an agent's blocks. Checked inside the transaction that would break it, so two concurrent
    changes can never both pass."""


class InvalidRequestError(AgentError, ValueError):
    """A request is malformed: names the field and what is wrong with it."""


class BlockNotFoundError(InvalidRequestError, LookupError):
    """No memory block with this label (or id) on the agent."""


class BlockLimitError(InvalidRequestError):
    """A block value would exceed the block's character limit."""


class PassageNotFoundError(InvalidRequestError, LookupError):
    """No archival passage with this id."""


class ToolNotFoundError(InvalidRequestError, LookupError):
    """No tool with this name or id."""


class ToolDefinitionError(InvalidRequestError):
    """A custom tool's source code or schema cannot be used (names the problem and line)."""


class SessionError(AgentError):
    """A session cannot be exported, imported or resumed as asked."""


class AgentStorageError(AgentError):
    """Storage kept failing after the configured retries; nothing half-written is visible."""
