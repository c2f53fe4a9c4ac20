"""Scheduled messages through the service (Letta's ``agents.schedule``): functions of an
:class:`AgentService`, as ``_archives``.

Creating and deleting go through the agent's actor (its records and the due index change in
the agent's fenced transactions, ``kelpie_agent.agent._schedules``); listing and retrieving
read the records from the KV, so they never activate an actor. A create wakes this node's
scheduler (``_scheduler``) so that a schedule due before its next scan is not late.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kelpie_agent.agent import (
    CreateSchedule,
    DeleteSchedule,
    InputMessage,
    ScheduledMessage,
)
from kelpie_agent.agent._schedules import SCHEDULES, schedule_key, unpack_schedule

from . import _validate as v
from ._errors import InvalidError, NotFoundError

if TYPE_CHECKING:
    from ._service import AgentService

__all__ = ["create_schedule", "delete_schedule", "get_schedule", "list_schedules"]


def _gone(error: Exception) -> bool:
    return isinstance(error, NotFoundError) and error.kind == "scheduled message"


async def create_schedule(
    service: AgentService,
    agent_id: str,
    messages: Sequence[InputMessage],
    schedule: Mapping[str, Any],
    *,
    max_steps: int | None = None,
    include_return_message_types: Sequence[str] | None = None,
) -> ScheduledMessage:
    """Store a schedule (``schedule``: Letta's one-time or recurring form). A bad schedule is
    a 422 naming its field (``schedule.cron_expression``, ``schedule.scheduled_at``). Not
    retried once its outcome is unknown: a second attempt would store a second schedule."""
    await service._agent(agent_id)
    request = CreateSchedule(
        tuple(messages),
        dict(schedule),
        max_steps,
        tuple(include_return_message_types) if include_return_message_types else None,
    )
    try:
        record: ScheduledMessage = await service._request(
            agent_id, request, retry_unknown=False, idempotent=False
        )
    except InvalidError as error:  # the core's "field: problem" for what no schema can say
        field, _, problem = str(error).partition(": ")
        if field == "cron_expression":
            field = "schedule.cron_expression"
        if field.startswith(("schedule.", "messages")) and problem:
            raise InvalidError(field, problem) from error
        raise
    service.scheduler.poke()
    return record


async def get_schedule(service: AgentService, agent_id: str, schedule_id: str) -> ScheduledMessage:
    await service._agent(agent_id)
    key = schedule_key(agent_id, v.ident(schedule_id, "scheduled_message_id"))
    data = await service.read(lambda: service.kv.get(key), f"scheduled message {schedule_id}")
    if data is None:
        raise NotFoundError("scheduled message", schedule_id)
    return unpack_schedule(data)


async def list_schedules(
    service: AgentService, agent_id: str, *, after: str | None = None, limit: int | None = None
) -> tuple[list[ScheduledMessage], bool]:
    """The agent's schedules in creation order (ids break ties), from ``after`` (a schedule
    id, exclusive), at most ``limit``; and whether more follow."""
    await service._agent(agent_id)
    prefix = SCHEDULES + f"{agent_id}/".encode()
    rows = await service.read(lambda: service.kv.scan_prefix(prefix), "the agent's schedules")
    records = sorted((unpack_schedule(d) for _, d in rows), key=lambda r: (r.created_at, r.id))
    if after is not None:
        ids = [r.id for r in records]
        if after not in ids:
            raise NotFoundError("scheduled message", after, f"after: {after!r} not found")
        records = records[ids.index(after) + 1 :]
    size = len(records) if limit is None else v.page_limit(limit)
    return records[:size], len(records) > size


async def delete_schedule(service: AgentService, agent_id: str, schedule_id: str) -> None:
    """Delete the schedule: no occurrence fires once this returns (one being sent already is
    kept: its input and the schedule's advance commit together, before the delete)."""
    await service._agent(agent_id)
    v.ident(schedule_id, "scheduled_message_id")
    await service._request(agent_id, DeleteSchedule(schedule_id), settled=_gone)
