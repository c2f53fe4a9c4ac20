"""``/v1/tags/``, ``/v1/models/``, ``/v1/models/embedding`` and ``/v1/tools/search``: what the
server knows across agents."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from kelpie_agent.agent._archive import embedder_name

from ._context import current_service
from ._models_directory import (
    EmbeddingModel,
    ProviderCategory,
    ProviderType,
    ToolSearch,
    ToolSearchResult,
    embedding_model_out,
    model_out,
    tool_hit_out,
)
from ._models_directory import Model as ModelOut
from ._routes_agents import Limit
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["directory_router"]


def directory_router() -> APIRouter:
    router = APIRouter(tags=["directory"])

    async def list_tags(
        after: str | None = None,
        before: str | None = None,
        limit: Limit = 50,
        name: str | None = None,
        query_text: str | None = None,
        order: Literal["asc", "desc"] = "asc",
        order_by: Literal["name"] = "name",
    ) -> list[str]:
        """Every agent tag, alphabetical by default. ``name`` (or the deprecated
        ``query_text``) keeps the tags containing it; ``after``/``before`` are tags."""
        return await current_service().list_tags(
            text=name if name is not None else query_text,
            after=after,
            before=before,
            limit=limit,
            order=order,
        )

    async def list_models(
        provider_category: Annotated[list[ProviderCategory] | None, Query()] = None,
        provider_name: str | None = None,
        provider_type: ProviderType | None = None,
    ) -> list[ModelOut]:
        """The models agents can use: the default one and every one an agent has."""
        models = await current_service().list_models(
            provider_name=provider_name,
            provider_type=provider_type,
            provider_categories=tuple(provider_category or ()),
        )
        return [model_out(m) for m in models]

    async def list_embedding_models() -> list[EmbeddingModel]:
        """The embedding model this node embeds passages, files and tools with."""
        embedder = current_service().embedder
        return [embedding_model_out(embedder_name(embedder), embedder.dimensions)]

    @router.post("/v1/tools/search", responses=ERROR_RESPONSES)
    async def search_tools(body: ToolSearch) -> list[ToolSearchResult]:
        """Tools ranked by relevance to ``query`` (vector, full-text or hybrid search)."""
        hits = await current_service().search_tools(
            body.query,
            mode=body.search_mode,
            tags=tuple(body.tags or ()),
            tool_types=tuple(body.tool_types or ()),
            limit=body.limit,
        )
        return [tool_hit_out(h) for h in hits]

    collection_route(router, "/v1/tags/", list_tags, ["GET"], response_model=list[str])
    collection_route(router, "/v1/models/", list_models, ["GET"], response_model=list[ModelOut])
    router.add_api_route(
        "/v1/models/embedding",
        list_embedding_models,
        methods=["GET"],
        responses=ERROR_RESPONSES,
        response_model=list[EmbeddingModel],
    )
    return router
