"""The service's errors: one root, each carrying what the HTTP layer answers.

Every error has ``status`` (the HTTP status code), ``detail`` (one line, naming the id or the
field), and ``retryable`` (whether sending the same request again can succeed; the HTTP layer
turns it into ``x-should-retry``). :func:`translate` maps the errors of the layers below (agent
core, actor runtime, storage) onto them; anything it does not know is a bug and propagates.
"""

from __future__ import annotations

from kelpie_agent.actors import ActorError, ActorUnavailableError, UnknownActorKindError
from kelpie_agent.agent import (
    AgentExistsError,
    AgentNotFoundError,
    AgentStorageError,
    BlockLimitError,
    BlockNotFoundError,
    InvalidRequestError,
    NameConflictError,
    PassageNotFoundError,
    ResourceNotFoundError,
    SessionError,
    SummarizerError,
    ToolDefinitionError,
    ToolNotFoundError,
)
from kelpie_agent.errors import KelpieError
from kelpie_agent.storage import StorageError

__all__ = [
    "ConflictError",
    "InvalidError",
    "NotFoundError",
    "ServiceError",
    "UnavailableError",
    "translate",
]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class ServiceError(KelpieError):
    """Root of the service's errors: ``status``, one-line ``detail``, ``retryable``."""

    status: int = 500
    retryable: bool = False

    def __init__(self, detail: str, *, status: int | None = None) -> None:
        self.detail = _one_line(detail)
        super().__init__(self.detail)
        if status is not None:
            self.status = status


class NotFoundError(ServiceError, LookupError):
    """404: no ``kind`` (agent, block, tool, passage, message) with this id."""

    status = 404

    def __init__(self, kind: str, id: str | None, detail: str | None = None) -> None:
        self.kind = kind
        self.id = id
        super().__init__(detail or f"{kind} {id!r} not found")


class InvalidError(ServiceError, ValueError):
    """422: a field of the request is invalid (``field`` names it, as ``memory_blocks[1].label``);
    400: a well-formed request the current state refuses (``field`` may be None)."""

    status = 422

    def __init__(self, field: str | None, problem: str, *, status: int = 422) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}" if field else problem, status=status)


class ConflictError(ServiceError):
    """409: the request collides with existing state (a name or label already taken, an agent
    that already exists, a session that cannot move). Not storage's ``ConflictError``, which
    the service never lets through. ``exists``: the thing to create exists already."""

    status = 409

    def __init__(self, detail: str, *, exists: bool = False) -> None:
        self.exists = exists
        super().__init__(detail)


class UnavailableError(ServiceError):
    """503: storage kept failing, the agent could not be reached in time, or this node is
    stopping. Nothing was done, or (``outcome_unknown``) it may have been: then ``retryable``
    is true only for requests that cannot apply twice (a message with the caller's ``otid``,
    updates, reads); a message without an otid, an archival insert or a tool run are not."""

    status = 503
    retryable = True

    def __init__(
        self, detail: str, *, outcome_unknown: bool = False, retryable: bool = True
    ) -> None:
        self.outcome_unknown = outcome_unknown
        self.retryable = retryable
        super().__init__(detail)


_LOOKUPS: tuple[tuple[type[Exception], str], ...] = (
    (BlockNotFoundError, "block"),
    (ToolNotFoundError, "tool"),
    (PassageNotFoundError, "passage"),
)


def translate(error: BaseException) -> ServiceError | None:
    """The service error for an error of a lower layer; None for a bug (let it propagate)."""
    if isinstance(error, ServiceError):
        return error
    text = _one_line(str(error)) or type(error).__name__
    if isinstance(error, AgentNotFoundError):
        return NotFoundError("agent", error.agent_id)
    if isinstance(error, ResourceNotFoundError):  # a folder, archive, schedule, ...
        return NotFoundError(error.kind, error.id, text)
    for cls, kind in _LOOKUPS:
        if isinstance(error, cls):
            return NotFoundError(kind, None, text)
    # Well-formed requests whose meaning is refused (no schema can say "the source defines a
    # function" or "the value fits the block's limit"): 400, not 422 (docs/http-api.md).
    if isinstance(error, BlockLimitError):
        return InvalidError("value", text, status=400)
    if isinstance(error, ToolDefinitionError):
        return InvalidError(
            None, text if text.startswith("source_code") else f"source_code: {text}", status=400
        )
    if isinstance(error, AgentExistsError):
        return ConflictError(text, exists=True)
    if isinstance(error, NameConflictError | SessionError):
        return ConflictError(text)
    if isinstance(error, InvalidRequestError):
        return InvalidError(None, text, status=400)
    if isinstance(error, AgentStorageError | StorageError):
        return UnavailableError(f"storage unavailable: {text}")
    if isinstance(error, SummarizerError):
        return UnavailableError(f"summarizer unavailable: {text}")
    if isinstance(error, UnknownActorKindError):
        return None
    if isinstance(error, ActorUnavailableError):
        return UnavailableError(f"agent unavailable: {text}")
    if isinstance(error, ActorError) and error.retryable:  # lease lost, dispatcher stopped
        # the request may have been applied: only the caller knows whether repeating it is
        # safe (the service's own retry loop says so for the requests it sends)
        return UnavailableError(f"agent unavailable: {text}", outcome_unknown=True, retryable=False)
    if isinstance(error, ConnectionError):  # this process is going down (a crashed sim node)
        return UnavailableError(f"node unavailable: {text}")
    return None
