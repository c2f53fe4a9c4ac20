"""Archives (``/v1/archives/``): archival memory shared between agents, their passages, and
attaching them to agents (``/v1/agents/{agent_id}/archives/attach|detach/{archive_id}``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from kelpie_agent.service import _archives as archives

from ._context import current_service
from ._models_archival import Passage, passage_out
from ._models_archives import (
    Archive,
    ArchiveCreate,
    ArchivePassage,
    ArchivePassages,
    ArchiveUpdate,
    archive_out,
)
from ._params import AgentId, ArchiveId, Cursor, IdQuery, PassageId
from ._routes_agents import MAX_PAGE
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["archives_router"]

Limit = Annotated[int, Query(ge=0, le=MAX_PAGE)]


def archives_router() -> APIRouter:
    router = APIRouter(tags=["archives"], responses=ERROR_RESPONSES)

    async def create_archive(body: ArchiveCreate) -> Archive:
        """A new, empty archive."""
        fields: dict[str, Any] = {"description": body.description, "embedding": body.embedding}
        if body.metadata is not None:
            fields["metadata"] = body.metadata
        return archive_out(await archives.create_archive(current_service(), body.name, **fields))

    async def list_archives(
        name: str | None = None,
        agent_id: IdQuery = None,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Literal["asc", "desc"] = "desc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[Archive]:
        """Archives by creation (newest first by default), by name or attached agent."""
        found = await archives.list_archives(
            current_service(),
            name=name,
            agent_id=agent_id,
            after=after,
            before=before,
            limit=limit,
            descending=order == "desc",
        )
        return [archive_out(a) for a in found]

    collection_route(router, "/v1/archives/", create_archive, ["POST"], response_model=Archive)
    collection_route(router, "/v1/archives/", list_archives, ["GET"], response_model=list[Archive])

    @router.get("/v1/archives/{archive_id}")
    async def get_archive(archive_id: ArchiveId) -> Archive:
        return archive_out(await archives.get_archive(current_service(), archive_id))

    @router.patch("/v1/archives/{archive_id}")
    async def update_archive(archive_id: ArchiveId, body: ArchiveUpdate) -> Archive:
        service = current_service()
        changes = body.changes()
        if not changes:
            return archive_out(await archives.get_archive(service, archive_id))
        return archive_out(await archives.update_archive(service, archive_id, changes))

    @router.delete("/v1/archives/{archive_id}", status_code=204, response_model=None)
    async def delete_archive(archive_id: ArchiveId) -> None:
        """Detach the archive from its agents, then delete it and its passages."""
        await archives.delete_archive(current_service(), archive_id)

    @router.post("/v1/archives/{archive_id}/passages")
    async def create_passage(archive_id: ArchiveId, body: ArchivePassage) -> Passage:
        """Embed and store one passage (every attached agent's archival memory sees it)."""
        [record] = await archives.add_archive_passages(current_service(), archive_id, [body.item()])
        return passage_out(record)

    @router.post("/v1/archives/{archive_id}/passages/batch")
    async def create_passages(archive_id: ArchiveId, body: ArchivePassages) -> list[Passage]:
        """Embed and store passages in one transaction (all or none)."""
        records = await archives.add_archive_passages(
            current_service(),
            archive_id,
            [p.item(f"passages[{i}].created_at") for i, p in enumerate(body.passages)],
        )
        return [passage_out(r) for r in records]

    @router.delete(
        "/v1/archives/{archive_id}/passages/{passage_id}", status_code=204, response_model=None
    )
    async def delete_passage(archive_id: ArchiveId, passage_id: PassageId) -> None:
        await archives.delete_archive_passage(current_service(), archive_id, passage_id)

    @router.patch("/v1/agents/{agent_id}/archives/attach/{archive_id}")
    async def attach_archive(agent_id: AgentId, archive_id: ArchiveId) -> dict[str, Any]:
        """Attach the archive: the agent's archival memory includes its passages."""
        await archives.attach_archive(current_service(), agent_id, archive_id)
        return {}

    @router.patch("/v1/agents/{agent_id}/archives/detach/{archive_id}")
    async def detach_archive(agent_id: AgentId, archive_id: ArchiveId) -> dict[str, Any]:
        await archives.detach_archive(current_service(), agent_id, archive_id)
        return {}

    return router
