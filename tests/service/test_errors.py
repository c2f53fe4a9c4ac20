"""The service's errors: one root, the HTTP status each carries, one-line details, whether
retrying helps, and how the lower layers' errors map onto them."""

from __future__ import annotations

import pytest

from kelpie_agent.actors import (
    ActorStoppedError,
    ActorUnavailableError,
    LeaseLostError,
    UnknownActorKindError,
)
from kelpie_agent.agent import (
    AgentExistsError,
    AgentNotFoundError,
    AgentStorageError,
    BlockLimitError,
    BlockNotFoundError,
    InvalidRequestError,
    NameConflictError,
    PassageNotFoundError,
    SessionError,
    ToolDefinitionError,
    ToolNotFoundError,
)
from kelpie_agent.errors import KelpieError
from kelpie_agent.service import (
    ConflictError,
    InvalidError,
    NotFoundError,
    ServiceError,
    UnavailableError,
    translate,
)
from kelpie_agent.storage import ConflictError as StorageConflict
from kelpie_agent.storage import StorageError


def test_every_error_carries_status_detail_and_retryable_under_one_root() -> None:
    cases = [
        (NotFoundError("agent", "agent-1"), 404, "agent 'agent-1' not found", False),
        (InvalidError("memory_blocks[0].label", "bad"), 422, "memory_blocks[0].label: bad", False),
        (InvalidError(None, "refused", status=400), 400, "refused", False),
        (ConflictError("taken\nreally"), 409, "taken really", False),
        (UnavailableError("storage  down"), 503, "storage down", True),
    ]
    for error, status, detail, retryable in cases:
        assert isinstance(error, ServiceError) and isinstance(error, KelpieError)
        assert (error.status, error.detail, error.retryable) == (status, detail, retryable)
        assert str(error) == detail
    assert isinstance(NotFoundError("tool", "t"), LookupError)
    assert isinstance(InvalidError("f", "x"), ValueError)
    assert NotFoundError("block", "b").kind == "block" and InvalidError("f", "x").field == "f"


@pytest.mark.parametrize(
    ("error", "cls", "status", "retryable"),
    [
        (AgentNotFoundError("agent-1"), NotFoundError, 404, False),
        (BlockNotFoundError("block 'b' not found"), NotFoundError, 404, False),
        (ToolNotFoundError("tool 't' not found"), NotFoundError, 404, False),
        (PassageNotFoundError("passage 'p' not found"), NotFoundError, 404, False),
        (BlockLimitError("over"), InvalidError, 400, False),
        (ToolDefinitionError("line 3: no function"), InvalidError, 400, False),
        (InvalidRequestError("refused"), InvalidError, 400, False),
        (AgentExistsError("exists"), ConflictError, 409, False),
        (SessionError("cannot move"), ConflictError, 409, False),
        (NameConflictError("label taken"), ConflictError, 409, False),
        (AgentStorageError("gave up"), UnavailableError, 503, True),
        (StorageError("disk"), UnavailableError, 503, True),
        (StorageConflict("conflict"), UnavailableError, 503, True),
        # the outcome is unknown: retryable only where the service knows the request is
        # idempotent (its retry loop says so), never by default
        (LeaseLostError("lost"), UnavailableError, 503, False),
        (ActorStoppedError("stopped"), UnavailableError, 503, False),
        (ActorUnavailableError("busy"), UnavailableError, 503, True),
        (ConnectionResetError("reset"), UnavailableError, 503, True),
    ],
)
def test_lower_layer_errors_translate_to_service_errors(
    error: Exception, cls: type[ServiceError], status: int, retryable: bool
) -> None:
    mapped = translate(error)
    assert isinstance(mapped, cls)
    assert (mapped.status, mapped.retryable) == (status, retryable)
    assert "\n" not in mapped.detail and mapped.detail


def test_ids_and_fields_survive_translation_and_bugs_do_not_translate() -> None:
    mapped = translate(AgentNotFoundError("agent-7"))
    assert isinstance(mapped, NotFoundError) and (mapped.kind, mapped.id) == ("agent", "agent-7")
    mapped = translate(BlockLimitError("block 'h': value has 9 characters, over its limit 5"))
    assert isinstance(mapped, InvalidError) and mapped.field == "value"
    lost = translate(LeaseLostError("x"))
    assert isinstance(lost, UnavailableError) and lost.outcome_unknown
    for bug in (KeyError("x"), TypeError("y"), UnknownActorKindError("no kind"), RuntimeError()):
        assert translate(bug) is None
    same = ConflictError("c")
    assert translate(same) is same
