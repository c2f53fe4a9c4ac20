"""``/v1/runs/``: list runs, one run, its usage and its messages (read from storage)."""

from __future__ import annotations

from typing import Annotated, Literal

import trio
from fastapi import APIRouter, Query
from pydantic import Field

from kelpie_agent.agent import StreamEvent, letta_json
from kelpie_agent.service import InvalidError

from ._context import current, current_service
from ._models_common import Id, NonBlank, RequestModel
from ._models_messages import LettaMessage, StopReasonType
from ._models_runs import Run, RunStatus, RunUsage, run_out, usage_out
from ._params import Cursor, IdListQuery, IdQuery, RunId
from ._routes_agents import Limit
from ._routes_messages import STREAM_DOC
from ._routing import ERROR_RESPONSES, collection_route
from ._sse import SseResponse, pinger

__all__ = ["RunStreamRequest", "runs_router"]


class RunStreamRequest(RequestModel):
    """``POST /v1/runs/{run_id}/stream`` (Letta's RetrieveStreamRequest)."""

    agent_id: Id | None = None
    run_id: Id | None = None
    otid: NonBlank | None = None
    starting_after: int = Field(default=0, ge=0)
    include_pings: bool = True
    poll_interval: float = Field(default=0.1, gt=0, le=60)
    batch_size: int = Field(default=100, ge=1, le=1000)


def follow_response(run_id: str, body: RunStreamRequest) -> SseResponse:
    """The run's events from storage as server-sent events, resumed after
    ``starting_after`` (message frames carry their ``seq_id``)."""
    node = current()
    service = node.service
    if body.run_id is not None and body.run_id != run_id:
        raise InvalidError(
            "run_id", f"names run {body.run_id!r}, the path run {run_id!r}", status=400
        )
    if body.otid is not None:
        raise InvalidError(
            "otid", "looking a run up by otid is not supported: name the run", status=400
        )

    async def produce(channel: trio.MemorySendChannel[StreamEvent]) -> None:
        await service.follow_run(
            run_id,
            channel,
            agent_id=body.agent_id,
            starting_after=body.starting_after,
            poll_interval=body.poll_interval,
            batch_size=body.batch_size,
        )

    return SseResponse(
        produce,
        ping=pinger(service.ports) if body.include_pings else None,
        ping_interval=node.ping_interval,
        observer=node.observer,
        seq_start=body.starting_after,
    )


def runs_router() -> APIRouter:
    router = APIRouter(tags=["runs"], responses=ERROR_RESPONSES)

    async def list_runs(
        agent_id: IdQuery = None,
        agent_ids: IdListQuery = None,
        conversation_id: IdQuery = None,
        statuses: Annotated[list[RunStatus] | None, Query()] = None,
        active: bool = False,
        background: bool | None = None,
        stop_reason: StopReasonType | None = None,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 100,
        order: Literal["asc", "desc"] | None = None,
        ascending: bool | None = None,
        order_by: Literal["created_at"] = "created_at",
    ) -> list[Run]:
        """Runs, newest first by default; ``after``/``before`` are run ids (Letta's
        cursors). ``agent_id`` and the deprecated ``agent_ids`` are combined."""
        if order is None:
            order = "asc" if ascending else "desc"
        agents = [*([agent_id] if agent_id is not None else []), *(agent_ids or ())]
        records = await current_service().list_runs(
            agent_ids=agents,
            conversation_id=conversation_id,
            statuses=tuple(statuses or ()),
            active=active,
            background=background,
            stop_reason=stop_reason,
            after=after,
            before=before,
            limit=limit,
            order=order,
        )
        return [run_out(r) for r in records]

    collection_route(router, "/v1/runs/", list_runs, ["GET"], response_model=list[Run])

    @router.get("/v1/runs/{run_id}")
    async def retrieve_run(run_id: RunId) -> Run:
        """One run: its status, stop reason, times and request config."""
        return run_out(await current_service().get_run(run_id))

    @router.get("/v1/runs/{run_id}/usage")
    async def run_usage(run_id: RunId) -> RunUsage:
        """The tokens the run's LLM calls used."""
        return usage_out(await current_service().get_run(run_id))

    @router.get("/v1/runs/{run_id}/messages")
    async def run_messages(
        run_id: RunId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 100,
        order: Literal["asc", "desc"] = "asc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[LettaMessage]:
        """The messages the run stored (its input first), oldest first by default;
        ``after``/``before`` are message ids (Letta's cursors)."""
        messages = await current_service().run_messages(
            run_id, after=after, before=before, limit=limit, order=order
        )
        return [letta_json(m) for m in messages]  # type: ignore[misc]

    @router.post(
        "/v1/runs/{run_id}/stream",
        response_class=SseResponse,
        status_code=200,
        responses={200: STREAM_DOC},
    )
    async def stream_run(run_id: RunId, body: RunStreamRequest) -> SseResponse:
        """Follow a run (background mode): its messages after ``starting_after`` as they are
        stored, then its stop reason and usage, from any node."""
        return follow_response(run_id, body)

    return router
