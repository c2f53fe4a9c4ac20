"""Scheduled messages (``/v1/agents/{agent_id}/schedule``, Letta's ``agents.schedule``):
create, list, retrieve and delete. The node's scheduler sends them (``service._scheduler``).

A bad schedule is a 422 naming its field: a cron expression that does not parse or never
fires, a one-time ``scheduled_at`` more than a minute in the past, a missing field."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from kelpie_agent.service import _schedules as schedules

from ._context import current_service
from ._models_schedules import (
    ScheduleCreate,
    ScheduleCreateResponse,
    ScheduleDeleteResponse,
    ScheduledMessageOut,
    ScheduleListResponse,
    scheduled_out,
)
from ._params import ID_PATTERN, AgentId, Cursor
from ._routing import ERROR_RESPONSES

__all__ = ["schedules_router"]

ScheduleId = Annotated[
    str, Path(pattern=ID_PATTERN, description="A scheduled message id (scheduled_message-...)")
]
# letta-client sends ``limit`` as a string
Limit = Annotated[str | None, Query(pattern=r"^[0-9]{1,4}$", description="At most this many")]


def schedules_router() -> APIRouter:
    router = APIRouter(tags=["agents"], responses=ERROR_RESPONSES)

    @router.post("/v1/agents/{agent_id}/schedule")
    async def create_schedule(agent_id: AgentId, body: ScheduleCreate) -> ScheduleCreateResponse:
        """Schedule messages for the agent, once (``scheduled_at``, epoch ms) or on a cron
        expression (five fields, UTC). Not retried by the client once its outcome is unknown
        (a second attempt would schedule twice)."""
        record = await schedules.create_schedule(
            current_service(),
            agent_id,
            [m.to_input() for m in body.messages],
            body.schedule.to_mapping(),
            max_steps=body.max_steps,
            include_return_message_types=body.include_return_message_types,
        )
        return ScheduleCreateResponse(
            id=record.id, next_scheduled_at=scheduled_out(record).next_scheduled_time
        )

    @router.get("/v1/agents/{agent_id}/schedule")
    async def list_schedules(
        agent_id: AgentId, after: Cursor = None, limit: Limit = None
    ) -> ScheduleListResponse:
        """The agent's pending schedules in creation order (a one-time schedule is gone once
        sent)."""
        found, more = await schedules.list_schedules(
            current_service(), agent_id, after=after, limit=int(limit) if limit else None
        )
        return ScheduleListResponse(
            has_next_page=more, scheduled_messages=[scheduled_out(r) for r in found]
        )

    @router.get("/v1/agents/{agent_id}/schedule/{scheduled_message_id}")
    async def retrieve_schedule(
        agent_id: AgentId, scheduled_message_id: ScheduleId
    ) -> ScheduledMessageOut:
        record = await schedules.get_schedule(current_service(), agent_id, scheduled_message_id)
        return scheduled_out(record)

    @router.delete("/v1/agents/{agent_id}/schedule/{scheduled_message_id}")
    async def delete_schedule(
        agent_id: AgentId, scheduled_message_id: ScheduleId
    ) -> ScheduleDeleteResponse:
        """Delete it: no occurrence is sent once this answers."""
        await schedules.delete_schedule(current_service(), agent_id, scheduled_message_id)
        return ScheduleDeleteResponse()

    return router
