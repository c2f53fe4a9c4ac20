"""``/v1/tags/`` and ``/v1/models/``: what the server knows across agents."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from ._context import current_service
from ._models_directory import Model as ModelOut
from ._models_directory import ProviderCategory, ProviderType, model_out
from ._routes_agents import Limit
from ._routing import collection_route

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

    collection_route(router, "/v1/tags/", list_tags, ["GET"], response_model=list[str])
    collection_route(router, "/v1/models/", list_models, ["GET"], response_model=list[ModelOut])
    return router
