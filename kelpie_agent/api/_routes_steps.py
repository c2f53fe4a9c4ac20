"""``/v1/steps/`` and a run's steps and trace (read from storage; feedback written there)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from kelpie_agent.agent import letta_json

from ._context import current_service
from ._models_messages import LettaMessage
from ._models_steps import (
    Feedback,
    ProviderTrace,
    Step,
    StepFeedback,
    StepMetrics,
    metrics_out,
    step_out,
    trace_out,
)
from ._params import ID_PATTERN, Cursor, DateTimeQuery, IdListQuery, IdQuery, RunId, epoch_seconds
from ._routes_agents import Limit
from ._routing import ERROR_RESPONSES, collection_route

__all__ = ["steps_router"]

StepId = Annotated[str, Path(pattern=ID_PATTERN, description="A step id (step-...)")]
Order = Literal["asc", "desc"]


def steps_router() -> APIRouter:
    router = APIRouter(tags=["steps"], responses=ERROR_RESPONSES)

    async def list_steps(
        agent_id: IdQuery = None,
        run_id: IdQuery = None,
        model: str | None = None,
        has_feedback: bool | None = None,
        feedback: Feedback | None = None,
        tags: Annotated[list[str] | None, Query()] = None,
        trace_ids: IdListQuery = None,
        start_date: DateTimeQuery = None,
        end_date: DateTimeQuery = None,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 50,
        order: Order = "desc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[Step]:
        """Steps, newest first by default, with Letta's filters; a step's ``trace_id`` is
        its run's id, so ``trace_ids`` selects runs. ``project_id`` (Letta Cloud only) is
        refused as undeclared (``_query.known_query``)."""
        records = await current_service().list_steps(
            agent_id=agent_id,
            run_id=run_id,
            model=model,
            has_feedback=has_feedback,
            feedback=feedback,
            tags=tuple(tags or ()),
            trace_ids=tuple(trace_ids or ()),
            start=epoch_seconds(start_date, "start_date"),
            end=epoch_seconds(end_date, "end_date"),
            after=after,
            before=before,
            limit=limit,
            order=order,
        )
        return [step_out(s) for s in records]

    collection_route(router, "/v1/steps/", list_steps, ["GET"], response_model=list[Step])

    @router.get("/v1/steps/{step_id}")
    async def retrieve_step(step_id: StepId) -> Step:
        """One step: its model, tokens, stop reason and feedback."""
        return step_out(await current_service().get_step(step_id))

    @router.patch("/v1/steps/{step_id}/feedback")
    async def step_feedback(step_id: StepId, body: StepFeedback) -> Step:
        """Set (``null``: clear) the step's feedback; ``tags``, when given, replace its tags."""
        return step_out(await current_service().step_feedback(step_id, body.feedback, body.tags))

    @router.get("/v1/steps/{step_id}/messages")
    async def step_messages(
        step_id: StepId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 100,
        order: Order = "asc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[LettaMessage]:
        """The messages the step produced (its answer, then its tools' returns)."""
        messages = await current_service().step_messages(
            step_id, after=after, before=before, limit=limit, order=order
        )
        return [letta_json(m) for m in messages]  # type: ignore[misc]

    @router.get("/v1/steps/{step_id}/metrics")
    async def step_metrics(step_id: StepId) -> StepMetrics:
        """The step's timing (Clock-port time, in nanoseconds)."""
        return metrics_out(await current_service().get_step(step_id))

    @router.get("/v1/steps/{step_id}/trace")
    async def step_trace(step_id: StepId) -> ProviderTrace:
        """A summary of the step's provider exchange (request and answer)."""
        return trace_out(await current_service().get_step(step_id))

    @router.get("/v1/runs/{run_id}/steps")
    async def run_steps(
        run_id: RunId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Limit = 100,
        order: Order = "asc",
        order_by: Literal["created_at"] = "created_at",
    ) -> list[Step]:
        """The run's steps in the order they ran (oldest first by default)."""
        records = await current_service().run_steps(
            run_id, after=after, before=before, limit=limit, order=order
        )
        return [step_out(s) for s in records]

    @router.get("/v1/runs/{run_id}/trace")
    async def run_trace(
        run_id: RunId, limit: Annotated[int, Query(ge=1, le=1000)] = 1000
    ) -> list[dict[str, Any]]:
        """The run's spans: the run (the root), then one ``agent_step`` span per step."""
        return await current_service().run_trace(run_id, limit)

    return router
