"""docs/service.md stays in step with the code: every public method of AgentService and every
error class is documented, and the public module exports each name once."""

from __future__ import annotations

import inspect
from pathlib import Path

import kelpie_agent.service as service
from kelpie_agent.service import AgentService, ServiceError

DOC = (Path(__file__).parents[2] / "docs" / "service.md").read_text()


def test_every_public_method_is_in_the_methods_table() -> None:
    methods = [
        name
        for name, member in inspect.getmembers(AgentService)
        if not name.startswith("_") and callable(member) and name != "run"
    ]
    assert len(methods) > 30
    missing = [name for name in methods if f"`{name}(" not in DOC]
    assert not missing, f"docs/service.md does not document {missing}"


def test_every_error_is_in_the_errors_table_and_exports_are_unique() -> None:
    errors = [
        name
        for name in service.__all__
        if isinstance(getattr(service, name), type)
        and issubclass(getattr(service, name), ServiceError)
    ]
    assert sorted(errors) == [
        "ConflictError",
        "InvalidError",
        "NotFoundError",
        "ServiceError",
        "UnavailableError",
    ]
    assert all(f"`{name}" in DOC for name in errors)
    assert len(service.__all__) == len(set(service.__all__))
    assert all(hasattr(service, name) for name in service.__all__)
