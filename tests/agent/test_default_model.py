"""The default model is one the installed anthropic SDK still serves.

``claude-sonnet-4-5`` was Kelpie's default until the SDK listed it as reaching end-of-life on
2026-11-30: every agent created without a model would have stopped working against the real
API. This test fails as soon as an SDK upgrade deprecates the default again.
"""

from __future__ import annotations

import attrs
from anthropic._data import DEPRECATED_MODELS
from anthropic.types import ModelParam

from kelpie_agent.agent import AgentRecord
from kelpie_agent.agent._models import DEFAULT_MODEL
from kelpie_agent.agent._requests import CreateAgent


def test_default_model_is_known_to_the_sdk_and_not_deprecated() -> None:
    name = AgentRecord(id="agent-1", name="a").llm_model
    assert name in ModelParam.__args__[0].__args__  # type: ignore[attr-defined]
    assert name not in DEPRECATED_MODELS, (name, DEPRECATED_MODELS.get(name))


def test_records_and_requests_share_the_default() -> None:
    assert attrs.fields(AgentRecord).model.default == DEFAULT_MODEL
    assert attrs.fields(CreateAgent).model.default == DEFAULT_MODEL
