"""``/v1/runs/``: list runs, one run, its usage and its messages (read from storage)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from kelpie_agent.agent import letta_json

from ._context import current_service
from ._models_messages import LettaMessage, StopReasonType
from ._models_runs import Run, RunStatus, RunUsage, run_out, usage_out
from ._routes_agents import Limit
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["runs_router"]


def runs_router() -> APIRouter:
    router = APIRouter(tags=["runs"], responses=ERROR_RESPONSES)

    async def list_runs(
        agent_id: str | None = None,
        agent_ids: Annotated[list[str] | None, Query()] = None,
        conversation_id: str | None = None,
        statuses: Annotated[list[RunStatus] | None, Query()] = None,
        active: bool = False,
        background: bool | None = None,
        stop_reason: StopReasonType | None = None,
        after: str | None = None,
        before: str | None = None,
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
    async def retrieve_run(run_id: str) -> Run:
        """One run: its status, stop reason, times and request config."""
        return run_out(await current_service().get_run(run_id))

    @router.get("/v1/runs/{run_id}/usage")
    async def run_usage(run_id: str) -> RunUsage:
        """The tokens the run's LLM calls used."""
        return usage_out(await current_service().get_run(run_id))

    @router.get("/v1/runs/{run_id}/messages")
    async def run_messages(
        run_id: str,
        after: str | None = None,
        before: str | None = None,
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

    return router
