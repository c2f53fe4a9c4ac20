"""``GET /v1/health/``: liveness, never behind auth."""

from __future__ import annotations

from fastapi import APIRouter

from ._models_common import ResponseModel
from ._routing import collection_route

__all__ = ["Health", "health_router"]


class Health(ResponseModel):
    status: str
    version: str


def health_router(version: str) -> APIRouter:
    router = APIRouter(tags=["health"])

    async def health() -> Health:
        """The server is up; ``version`` is Kelpie's."""
        return Health(status="ok", version=version)

    collection_route(router, "/v1/health/", health, ["GET"], response_model=Health)
    return router
