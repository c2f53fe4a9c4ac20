"""Models in Letta's shapes (``Model``, ``EmbeddingModel``), for ``/v1/models/`` and
``/v1/models/embedding``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kelpie_agent.service import ModelInfo, ToolHit

from ._models_common import RequestModel, ResponseModel
from ._models_tools import Tool, tool_out

__all__ = [
    "EmbeddingModel",
    "Model",
    "ProviderCategory",
    "ProviderType",
    "ToolSearch",
    "ToolSearchResult",
    "embedding_model_out",
    "model_out",
    "tool_hit_out",
]

ProviderCategory = Literal["base", "byok"]
# letta_client.types.ProviderType: the SDK may send any of them as a filter
ProviderType = Literal[
    "anthropic", "azure", "baseten", "bedrock", "cerebras", "chatgpt_oauth", "deepseek",
    "fireworks", "google_ai", "google_vertex", "groq", "hugging-face", "letta",
    "lmstudio_openai", "minimax", "moonshot", "moonshot_coding", "mistral", "ollama", "openai",
    "together", "vllm", "sglang", "openrouter", "xai", "zai", "zai_coding",
]  # fmt: skip


class Model(ResponseModel):
    """An LLM agents can use (Letta's Model)."""

    handle: str
    name: str
    display_name: str
    model: str
    model_endpoint_type: Literal["anthropic"] = "anthropic"
    model_type: Literal["llm"] = "llm"
    provider_type: Literal["anthropic"] = "anthropic"
    provider_name: str = "anthropic"
    provider_category: ProviderCategory = "base"
    context_window: int
    max_context_window: int
    max_tokens: int


class EmbeddingModel(ResponseModel):
    """An embedding model (Letta's EmbeddingModel): the node's embedder, which every agent's
    archival memory and every folder uses. Kelpie's default embedder is local and in-process,
    which Letta's vocabulary calls ``hugging-face`` (as folders' ``embedding_config`` already
    report it; decision Dembed-1)."""

    handle: str
    name: str
    display_name: str
    embedding_model: str
    embedding_dim: int
    embedding_endpoint_type: Literal["hugging-face"] = "hugging-face"
    provider_type: Literal["hugging-face"] = "hugging-face"
    provider_name: str = "kelpie"
    model_type: Literal["embedding"] = "embedding"


def embedding_model_out(name: str, dimensions: int) -> EmbeddingModel:
    return EmbeddingModel(
        handle=f"kelpie/{name}",
        name=name,
        display_name=name,
        embedding_model=name,
        embedding_dim=dimensions,
    )


def model_out(info: ModelInfo) -> Model:
    return Model(
        handle=info.handle,
        name=info.name,
        display_name=info.name,
        model=info.name,
        context_window=info.context_window,
        max_context_window=info.context_window,
        max_tokens=info.max_tokens,
    )


class ToolSearch(RequestModel):
    """``POST /v1/tools/search`` (Letta's ToolSearchRequest)."""

    query: str | None = None
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    tags: list[str] | None = None
    tool_types: list[str] | None = None
    limit: int = Field(default=50, ge=1, le=1000)


class ToolSearchResult(ResponseModel):
    """One tool found (Letta's ToolSearchResult)."""

    tool: Tool
    combined_score: float
    embedded_text: str | None = None
    vector_rank: int | None = None
    fts_rank: int | None = None


def tool_hit_out(hit: ToolHit) -> ToolSearchResult:
    return ToolSearchResult(
        tool=tool_out(hit.tool),
        combined_score=hit.combined_score,
        embedded_text=hit.embedded_text,
        vector_rank=hit.vector_rank,
        fts_rank=hit.fts_rank,
    )
