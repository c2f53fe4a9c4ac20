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
    "PendingApprovalError",
    "ResourceNotFoundError",
    "SessionError",
    "StaleSessionError",
    "SummarizerError",
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


class PendingApprovalError(SessionError):
    """A new message while the agent waits for approval of a tool call (Letta's 409): the
    client must approve or deny first."""

    def __init__(self, pending_request_id: str | None) -> None:
        self.pending_request_id = pending_request_id
        super().__init__(
            "Cannot send a new message: The agent is waiting for approval on a tool call "
            f"({pending_request_id}). Please approve or deny the pending request before "
            "continuing."
        )


class ResourceNotFoundError(InvalidRequestError, LookupError):
    """A folder, file, archive, identity, schedule or MCP server that does not exist (or is
    not attached where the request says)."""

    def __init__(self, kind: str, id: str, detail: str | None = None) -> None:
        self.kind = kind
        self.id = id
        super().__init__(detail or f"{kind} {id!r} not found")


class SummarizerError(AgentError):
    """An on-demand compaction could not get a summary from the LLM (nothing changed)."""


class AgentStorageError(AgentError):
    """Storage kept failing after the configured retries; nothing half-written is visible."""


class StaleSessionError(AgentStorageError):
    """This activation's session is behind what storage holds (found under the lease's fence);
    it is marked stale, and the request may be retried: the next one loads the agent again."""
