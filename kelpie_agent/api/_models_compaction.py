"""Context compaction in Letta's shapes: ``CompactionSettings`` in, ``CompactionResponse`` out.

Every field the SDK can send takes effect or is refused with a 422 naming it: ``model`` and
``model_settings`` (a separate summarizer model) and the ``self_compact_*`` modes are not
implemented, so they are refused rather than ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator

from kelpie_agent.agent import CompactMessages

from ._models_common import RequestModel, ResponseModel

__all__ = ["CompactRequest", "CompactionResponse", "CompactionSettingsModel"]

# The schema states exactly what is accepted (the API fuzzer checks it): null, or left out.
_AGENT_MODEL_ONLY = WithJsonSchema(
    {"type": "null", "description": "not supported by this server: the agent's model summarizes"}
)


class CompactionSettingsModel(RequestModel):
    mode: Literal["sliding_window", "all"] = "sliding_window"
    prompt: str | None = None
    clip_chars: int | None = Field(default=50_000, ge=1)
    sliding_window_percentage: float = Field(default=0.3, gt=0, lt=1)
    prompt_acknowledgement: bool = False
    model: Annotated[str | None, _AGENT_MODEL_ONLY] = None
    model_settings: Annotated[dict[str, Any] | None, _AGENT_MODEL_ONLY] = None

    @field_validator("model", "model_settings")
    @classmethod
    def _one_model(cls, value: object) -> object:
        if value is not None:
            raise ValueError("a separate summarizer model is not supported (the agent's is used)")
        return value

    def request(self) -> CompactMessages:
        return CompactMessages(
            self.mode,
            self.prompt,
            self.clip_chars,
            self.sliding_window_percentage,
            acknowledge=self.prompt_acknowledgement,
        )


class CompactRequest(RequestModel):
    """``POST /v1/agents/{id}/summarize`` (``agents.messages.compact``)."""

    compaction_settings: CompactionSettingsModel | None = None


class CompactionResponse(ResponseModel):
    summary: str
    num_messages_before: int
    num_messages_after: int
