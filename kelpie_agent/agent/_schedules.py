"""Scheduled messages: durable records an agent fires at their time, exactly once.

A schedule (Letta's ``agents.schedule``) is a message the server sends to its agent at a time
(``one-time``, ``scheduled_at`` in epoch milliseconds) or on a cron expression (``recurring``,
five fields, UTC). Records live with the agent and are written only by its actor:

==========================================  ==========================================
``sched/<agent>/<schedule_id>``              :class:`ScheduledMessage`
``schedq/<next_at µs:016x>/<agent>/<id>``    the due index: what any node's scheduler
                                             scans to find schedules that are due
==========================================  ==========================================

**Exactly once.** A node's scheduler asks the agent's actor to ``FireSchedule(id, due)``. The
actor checks that the record is still due at ``due`` and sends its message as a new run whose
input commit *also* advances the schedule (a recurring one to its next time, a one-time one
deleted) and moves its due-index entry, in the same fenced transaction. A crash before that
commit leaves the schedule due, so it fires later; a crash after it leaves the run to resume on
the next activation; a second node (or a retry) asking to fire the same occurrence finds it no
longer due. Each occurrence's input carries the otid ``sched-<id>-<due µs>``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import attrs

from ._codec import pack, register, unpack
from ._cron import parse_cron
from ._errors import InvalidRequestError, ResourceNotFoundError
from ._requests import InputMessage, SendMessage
from ._runtime import AgentRuntime

__all__ = [
    "DUE",
    "SCHEDULES",
    "ScheduledMessage",
    "create_schedule",
    "delete_schedule",
    "due_key",
    "fire_schedule",
    "schedule_key",
    "schedule_writes",
]

SCHEDULES = b"sched/"
DUE = b"schedq/"
# A one-time schedule up to this many seconds in the past is sent at once (the client's clock
# and the server's differ a little); further back it is refused (Dsched-2).
PAST_GRACE = 60.0


def schedule_key(agent_id: str, schedule_id: str) -> bytes:
    return SCHEDULES + f"{agent_id}/{schedule_id}".encode()


def micros(epoch: float) -> int:
    return max(0, round(epoch * 1_000_000))


def due_key(next_at: float, agent_id: str, schedule_id: str) -> bytes:
    return DUE + f"{micros(next_at):016x}/{agent_id}/{schedule_id}".encode()


def parse_due_key(key: bytes) -> tuple[int, str, str]:
    """``(due µs, agent id, schedule id)`` of a due-index key."""
    stamp, agent_id, schedule_id = key[len(DUE) :].decode().split("/")
    return int(stamp, 16), agent_id, schedule_id


async def due_now(kv: Any, now: float, limit: int = 100) -> list[tuple[int, str, str]]:
    """Occurrences due at or before ``now``, oldest first (what a scheduler fires)."""
    end = DUE + f"{micros(now) + 1:016x}".encode()
    rows = await kv.scan(DUE, end, limit=limit)
    return [parse_due_key(key) for key, _ in rows]


async def next_due(kv: Any) -> float | None:
    """When the earliest schedule of any agent is due (epoch seconds), if any."""
    rows = await kv.scan_prefix(DUE, limit=1)
    return parse_due_key(rows[0][0])[0] / 1_000_000 if rows else None


def _messages(value: Any) -> tuple[InputMessage, ...]:
    return tuple(value)


@attrs.frozen
class ScheduledMessage:
    """One schedule. ``kind`` is ``one-time`` (``scheduled_at``: epoch ms) or ``recurring``
    (``cron``); ``next_at`` (epoch seconds) is when it fires next, ``None`` once a one-time
    schedule has fired (then the record is gone)."""

    id: str
    agent_id: str
    messages: tuple[InputMessage, ...] = attrs.field(converter=_messages)
    kind: str
    next_at: float
    scheduled_at: float | None = None
    cron: str | None = None
    max_steps: int | None = None
    include_return_message_types: tuple[str, ...] | None = None
    created_at: float = 0.0
    fired: int = 0  # occurrences sent so far

    @property
    def due(self) -> bytes:
        return due_key(self.next_at, self.agent_id, self.id)


register("schedule", ScheduledMessage)


def iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.UTC).isoformat()


def schedule_writes(
    old: ScheduledMessage | None, new: ScheduledMessage | None
) -> list[tuple[bytes, bytes | None]]:
    """The writes (``None`` deletes) that replace ``old`` by ``new`` with the due index."""
    writes: list[tuple[bytes, bytes | None]] = []
    if old is not None and (new is None or new.due != old.due):
        writes.append((old.due, None))
    if new is not None:
        writes.append((schedule_key(new.agent_id, new.id), pack(new)))
        writes.append((new.due, b""))
    elif old is not None:
        writes.append((schedule_key(old.agent_id, old.id), None))
    return writes


async def _apply(rt: AgentRuntime, writes: list[tuple[bytes, bytes | None]], what: str) -> None:
    async def build(txn: Any) -> None:
        for key, value in writes:
            if value is None:
                await txn.delete(key)
            else:
                await txn.set(key, value)

    await rt.commit(build, what)


async def create_schedule(
    rt: AgentRuntime,
    messages: tuple[InputMessage, ...],
    schedule: Mapping[str, Any],
    *,
    max_steps: int | None = None,
    include_return_message_types: tuple[str, ...] | None = None,
) -> ScheduledMessage:
    """Store a new schedule (``schedule`` is Letta's ``{"type": "one-time", "scheduled_at"}``
    or ``{"type": "recurring", "cron_expression"}``)."""
    agent = rt.require()
    if not messages:
        raise InvalidRequestError("messages: a schedule needs at least one message")
    for message in messages:
        if message.role not in ("user", "system", "assistant") or not message.content.strip():
            raise InvalidRequestError("messages: user, system or assistant messages with text")
    now = rt.now()
    kind = schedule.get("type") or "one-time"
    if kind == "one-time":
        at = schedule.get("scheduled_at")
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise InvalidRequestError("schedule.scheduled_at: epoch milliseconds are required")
        if float(at) / 1000.0 < now - PAST_GRACE:
            raise InvalidRequestError(
                f"schedule.scheduled_at: {iso(float(at) / 1000.0)} is in the past (now {iso(now)})"
            )
        scheduled_at, cron, next_at = float(at), None, max(float(at) / 1000.0, now)
    elif kind == "recurring":
        parsed = parse_cron(schedule.get("cron_expression"))
        scheduled_at, cron, next_at = None, parsed.expression, parsed.next_after(now)
    else:
        raise InvalidRequestError(f"schedule.type: must be 'one-time' or 'recurring', got {kind!r}")
    record = ScheduledMessage(
        id=rt.new_id("scheduled_message"),
        agent_id=agent.id,
        messages=messages,
        kind=kind,
        next_at=next_at,
        scheduled_at=scheduled_at,
        cron=cron,
        max_steps=max_steps,
        include_return_message_types=include_return_message_types,
        created_at=now,
    )
    await _apply(rt, schedule_writes(None, record), "a scheduled message")
    return record


async def _load(rt: AgentRuntime, schedule_id: str) -> ScheduledMessage | None:
    data = await rt.get(schedule_key(rt.agent_id, schedule_id), f"schedule {schedule_id}")
    return unpack_schedule(data) if data is not None else None


async def delete_all(rt: AgentRuntime) -> None:
    """Delete every schedule of the agent (the agent is being deleted)."""
    rows = await rt.scan_all(SCHEDULES + f"{rt.agent_id}/".encode(), "the agent's schedules")
    for _, value in rows:
        await _apply(rt, schedule_writes(unpack_schedule(value), None), "a deleted schedule")


async def delete_schedule(rt: AgentRuntime, schedule_id: str) -> None:
    rt.require()
    record = await _load(rt, schedule_id)
    if record is None:
        raise ResourceNotFoundError("scheduled message", schedule_id)
    await _apply(rt, schedule_writes(record, None), "a deleted schedule")


def advanced(record: ScheduledMessage) -> ScheduledMessage | None:
    """The record after the occurrence at ``next_at`` fired (``None``: nothing left)."""
    if record.cron is None:
        return None
    following = parse_cron(record.cron).next_after(record.next_at)
    return attrs.evolve(record, next_at=following, fired=record.fired + 1)


async def fire_schedule(rt: AgentRuntime, schedule_id: str, due: int, send: Any) -> object | None:
    """Send the occurrence of ``schedule_id`` due at ``due`` (µs) if it is still due (else
    ``None``): ``send(SendMessage)`` runs it with the schedule's update in its input commit."""
    rt.require()
    record = await _load(rt, schedule_id)
    if record is None or micros(record.next_at) != due:
        await _drop_stale(rt, due, schedule_id)
        return None
    await rt.hazard("agent.schedule_due")  # decided to fire; the input is not committed
    otid = f"sched-{record.id}-{due:x}"
    first, *rest = record.messages
    inputs = (attrs.evolve(first, otid=otid), *rest)
    request = SendMessage(
        inputs,
        max_steps=record.max_steps,
        extra_writes=tuple(schedule_writes(record, advanced(record))),
    )
    result: object = await send(request)
    return result


async def _drop_stale(rt: AgentRuntime, due: int, schedule_id: str) -> None:
    """A due-index entry whose schedule is gone or due at another time is stale (the fire
    that advanced the schedule deleted it; only a bug or a torn write leaves one): delete it,
    so that no scheduler keeps asking to fire it."""
    key = DUE + f"{due:016x}/{rt.agent_id}/{schedule_id}".encode()
    if await rt.get(key, "a due schedule") is not None:
        await _apply(rt, [(key, None)], "a stale due-index entry")


def unpack_schedule(data: bytes) -> ScheduledMessage:
    record: ScheduledMessage = unpack(data)
    return record
