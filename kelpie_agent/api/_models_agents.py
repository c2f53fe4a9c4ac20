"""Agents in Letta's shapes: ``AgentState`` and the create/update bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from kelpie_agent.agent import AgentView
from kelpie_agent.llm._types import TOOL_NAME

from ._models_blocks import Block, BlockCreate, block_out
from ._models_common import Id, JsonObject, NonBlank, RequestModel, ResponseModel, epoch_datetime
from ._models_folders import FolderOut, node_folder_out
from ._models_messages import InputMessageModel, StopReasonType
from ._models_rules import ToolRuleModel, rule_out
from ._models_tools import Tool, tool_out

__all__ = [
    "AgentCreate",
    "AgentState",
    "AgentType",
    "AgentUpdate",
    "LlmConfig",
    "LlmConfigIn",
    "Memory",
    "ToolRuleModel",
    "agent_out",
]

AgentType = Literal["memgpt_agent", "letta_v1_agent", "react_agent"]
MAX_CONTEXT_WINDOW = 10_000_000
# The providers letta-client's LlmConfig.model_endpoint_type knows that Kelpie could name.
_ENDPOINT_TYPES = ("anthropic", "openai", "google_ai", "ollama", "bedrock", "deepseek", "xai")


class LlmConfigIn(RequestModel):
    """The parts of Letta's ``llm_config`` that Kelpie uses."""

    model: NonBlank | None = Field(default=None, max_length=200)
    handle: NonBlank | None = Field(default=None, max_length=200)
    model_endpoint_type: str | None = None
    context_window: int | None = Field(default=None, ge=256, le=MAX_CONTEXT_WINDOW)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_CONTEXT_WINDOW)

    def model_handle(self) -> str | None:
        if self.handle:
            return self.handle
        if self.model:
            if "/" in self.model:
                return self.model
            return f"{self.model_endpoint_type or 'anthropic'}/{self.model}"
        return None


class _AgentFields(RequestModel):
    name: NonBlank | None = Field(default=None, max_length=200)
    system: str | None = None
    model: NonBlank | None = Field(default=None, max_length=200)
    embedding: NonBlank | None = Field(default=None, max_length=200)
    llm_config: LlmConfigIn | None = None
    context_window_limit: int | None = Field(default=None, ge=256, le=MAX_CONTEXT_WINDOW)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_CONTEXT_WINDOW)
    description: str | None = None
    tags: list[str] | None = None
    metadata: JsonObject | None = None
    tool_rules: list[ToolRuleModel] | None = None
    timezone: NonBlank | None = Field(default=None, max_length=100)

    def model_handle(self) -> str | None:
        if self.model:
            return self.model
        return self.llm_config.model_handle() if self.llm_config else None

    def context_window(self) -> int | None:
        if self.context_window_limit is not None:
            return self.context_window_limit
        return self.llm_config.context_window if self.llm_config else None

    def output_tokens(self) -> int | None:
        if self.max_tokens is not None:
            return self.max_tokens
        return self.llm_config.max_tokens if self.llm_config else None


class AgentCreate(_AgentFields):
    """``POST /v1/agents/``."""

    agent_type: AgentType = "letta_v1_agent"
    memory_blocks: list[BlockCreate] | None = None
    block_ids: list[Id] | None = None
    tool_ids: list[Id] | None = None
    tools: list[Annotated[str, StringConstraints(pattern=TOOL_NAME.pattern)]] | None = None
    include_base_tools: bool = True
    initial_message_sequence: list[InputMessageModel] | None = None
    # linked in the creating transaction (a missing one is a 404, and nothing is created);
    # the folders are attached right after, with their files opened (agents.folders.attach)
    identity_ids: list[Id] | None = None
    folder_ids: list[Id] | None = None


class AgentUpdate(_AgentFields):
    """``PATCH /v1/agents/{id}``: only the fields given change."""

    tool_ids: list[Id] | None = None
    block_ids: list[Id] | None = None

    def changes(self) -> dict[str, Any]:
        """The actor's ``UpdateAgent`` changes for the fields set (``null`` = unchanged)."""
        out: dict[str, Any] = {}
        for name in ("name", "system", "embedding", "description", "timezone", "metadata"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.tags is not None:
            out["tags"] = tuple(self.tags)
        if self.tool_rules is not None:
            out["tool_rules"] = tuple(r.to_record() for r in self.tool_rules)
        for key, value in (
            ("model", self.model_handle()),
            ("context_window", self.context_window()),
            ("max_tokens", self.output_tokens()),
        ):
            if value is not None:
                out[key] = value
        return out


class LlmConfig(ResponseModel):
    model: str
    model_endpoint_type: str
    context_window: int
    max_tokens: int | None = None
    handle: str | None = None


class Memory(ResponseModel):
    agent_type: str | None = None
    blocks: list[Block]


class AgentState(ResponseModel):
    """An agent as Letta's AgentState."""

    id: str
    name: str
    agent_type: AgentType
    system: str
    llm_config: LlmConfig
    memory: Memory
    blocks: list[Block]
    tools: list[Tool]
    sources: list[FolderOut] = Field(default_factory=list)  # the attached folders
    identity_ids: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    description: str | None = None
    metadata: JsonObject = Field(default_factory=dict)
    message_ids: list[str] = Field(default_factory=list)
    model: str | None = None
    embedding: str | None = None
    tool_rules: list[dict[str, Any]] = Field(default_factory=list)
    last_stop_reason: StopReasonType | None = None
    timezone: str | None = None


def _sources(view: AgentView) -> list[FolderOut]:
    """The attached folders, as ``folders.retrieve`` shows them."""
    return [node_folder_out(f) for f in view.folders]


def agent_out(view: AgentView) -> AgentState:
    agent = view.agent
    provider = agent.model.split("/", 1)[0] if "/" in agent.model else "anthropic"
    blocks = [block_out(b) for b in view.blocks]
    return AgentState(
        id=agent.id,
        name=agent.name,
        agent_type=agent.agent_type,  # type: ignore[arg-type]
        system=agent.system,
        llm_config=LlmConfig(
            model=agent.llm_model,
            model_endpoint_type=provider if provider in _ENDPOINT_TYPES else "anthropic",
            context_window=agent.context_window,
            max_tokens=agent.max_tokens,
            handle=agent.model,
        ),
        memory=Memory(agent_type=agent.agent_type, blocks=blocks),
        blocks=blocks,
        tools=[tool_out(t) for t in view.tools],
        sources=_sources(view),
        identity_ids=list(agent.identity_ids),
        tags=list(agent.tags),
        created_at=epoch_datetime(agent.created_at) if agent.created_at else None,
        updated_at=epoch_datetime(agent.updated_at) if agent.updated_at else None,
        description=agent.description or None,
        metadata=dict(agent.metadata),
        message_ids=list(view.message_ids),
        model=agent.model,
        embedding=agent.embedding,
        tool_rules=[rule_out(r) for r in agent.tool_rules],
        last_stop_reason=view.last_stop_reason,  # type: ignore[arg-type]
        timezone=agent.timezone,
    )
