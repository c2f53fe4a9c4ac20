"""Scheduled messages in the agent core: durable records fired exactly once at their time
(one-time and cron), across repeated and concurrent fire requests and node crashes; cron
parsing; deleting an agent deletes its schedules."""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    CreateSchedule,
    DeleteAgent,
    DeleteSchedule,
    FireSchedule,
    InputMessage,
    InvalidRequestError,
    ResourceNotFoundError,
    ScheduledMessage,
    TurnResult,
    UserMessage,
)
from kelpie_agent.agent._cron import parse_cron
from kelpie_agent.agent._errors import StaleSessionError
from kelpie_agent.agent._schedules import DUE, SCHEDULES, due_now
from kelpie_dst.shims import LlmTiming, ScriptedPolicy, open_kv, sim_ports

from .harness import activate, check_history, create_agent, make_env, node_kv, stored_messages


def _hello() -> tuple[InputMessage, ...]:
    return (InputMessage("user", "scheduled hello"),)


async def _fire_all(actor: Any, kv: Any, now: float) -> list[object]:
    fired = []
    for due, _, schedule_id in await due_now(kv, now):
        try:
            fired.append(await actor.handle(FireSchedule(schedule_id, due)))
        except StaleSessionError:
            # The two schedulers' activations share no lease here, so one may find the other
            # running this occurrence; it gives way (as a deposed activation does, Dlead19-1)
            # and the next poll finds the run finished.
            continue
    return fired


def _inputs(messages: list[Any]) -> list[Any]:
    return [m for m in messages if isinstance(m, UserMessage) and m.content == "scheduled hello"]


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_one_time_schedule_fires_once_then_is_gone() -> None:
    kv = node_kv()
    actor, view = await create_agent(make_env(ScriptedPolicy()), kv)
    clock = sim_ports().clock
    at_ms = (clock.now() + 30) * 1000
    record = await actor.handle(
        CreateSchedule(_hello(), {"type": "one-time", "scheduled_at": at_ms})
    )
    assert isinstance(record, ScheduledMessage)
    assert await due_now(kv, clock.now()) == []  # not yet
    await trio.sleep(31)
    due = await due_now(kv, clock.now())
    assert [d[2] for d in due] == [record.id]
    first = await actor.handle(FireSchedule(record.id, due[0][0]))
    again = await actor.handle(FireSchedule(record.id, due[0][0]))  # a second node, a retry
    assert isinstance(first, TurnResult) and again is None
    assert await kv.scan_prefix(SCHEDULES) == [] and await kv.scan_prefix(DUE) == []
    assert len(_inputs(await check_history(kv, view.agent.id))) == 1
    with pytest.raises(ResourceNotFoundError):
        await actor.handle(DeleteSchedule(record.id))


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_recurring_schedule_advances_with_each_occurrence() -> None:
    kv = node_kv()
    actor, view = await create_agent(make_env(ScriptedPolicy()), kv)
    clock = sim_ports().clock
    record = await actor.handle(
        CreateSchedule(_hello(), {"type": "recurring", "cron_expression": "*/5 * * * *"})
    )
    fires = 0
    for _ in range(4):
        await trio.sleep(300)
        fires += sum(1 for r in await _fire_all(actor, kv, clock.now()) if r is not None)
    assert fires == 4
    stored = [m for m in await stored_messages(kv, view.agent.id) if isinstance(m, UserMessage)]
    otids = [m.otid for m in stored if m.content == "scheduled hello"]
    assert len(otids) == 4 and len(set(otids)) == 4
    await actor.handle(DeleteSchedule(record.id))
    await trio.sleep(600)
    assert await _fire_all(actor, kv, clock.now()) == []


@pytest.mark.dst(seeds=8, guards="strict")
async def test_firing_is_exactly_once_across_crashes_and_two_schedulers(
    dst: kelpie_dst.Simulation,
) -> None:
    """Two nodes' schedulers fire the same schedules while one of them crashes and restarts;
    every occurrence reaches the agent exactly once."""
    db = dst.add_node("db")
    kv = node_kv(host=db)
    policy = ScriptedPolicy()
    actor, view = await create_agent(make_env(policy), kv)
    agent_id = view.agent.id
    clock = sim_ports().clock
    await actor.handle(
        CreateSchedule(_hello(), {"type": "recurring", "cron_expression": "* * * * *"})
    )
    timing = LlmTiming(0.5, 2.0, 50.0)

    async def scheduler(node: kelpie_dst.Node) -> None:
        env = make_env(policy, timing=timing)
        while True:
            mine = await activate(env, open_kv(node, host=db), agent_id, sim_ports(node))
            await _fire_all(mine, open_kv(node, host=db), sim_ports(node).clock.now())
            await trio.sleep(dst.rng("test/poll").uniform(5, 20))

    nodes = [dst.add_node(f"n{i}", scheduler) for i in range(2)]
    for _ in range(3):
        await trio.sleep(dst.rng("test/crash").uniform(20, 90))
        dst.crash(nodes[0])
        dst.restart(nodes[0], after=2.0)
    await trio.sleep(120)
    for node in nodes:
        dst.crash(node)
    await trio.sleep(5)
    survivor = await activate(make_env(policy), kv, agent_id)
    await _fire_all(survivor, kv, clock.now())
    messages = await check_history(kv, agent_id)
    otids = [m.otid for m in _inputs(messages)]
    assert len(otids) == len(set(otids)), "an occurrence fired twice"
    expected = int(clock.now() // 60) - int(view.agent.created_at // 60)
    assert abs(len(otids) - expected) <= 1, (len(otids), expected)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_deleting_the_agent_deletes_its_schedules_and_bad_schedules_are_refused() -> None:
    kv = node_kv()
    actor, _ = await create_agent(make_env(ScriptedPolicy()), kv)
    await actor.handle(
        CreateSchedule(_hello(), {"type": "recurring", "cron_expression": "0 9 * * mon"})
    )
    for bad, match in (
        ({"type": "recurring", "cron_expression": "0 9 * *"}, "expected 5 fields"),
        ({"type": "recurring", "cron_expression": "61 * * * *"}, "minute"),
        ({"type": "one-time"}, "scheduled_at"),
        ({"type": "sometimes"}, "schedule.type"),
    ):
        with pytest.raises(InvalidRequestError, match=match):
            await actor.handle(CreateSchedule(_hello(), bad))
    await actor.handle(DeleteAgent())
    assert await kv.scan_prefix(SCHEDULES) == [] and await kv.scan_prefix(DUE) == []


def test_cron_matches_posix_semantics() -> None:
    start = _dt.datetime(2026, 1, 3, 12, 7, tzinfo=_dt.UTC).timestamp()  # a Saturday
    cron = parse_cron("*/15 9-17 * * mon-fri")
    first = cron.next_after(start)
    assert _dt.datetime.fromtimestamp(first, _dt.UTC) == _dt.datetime(
        2026, 1, 5, 9, 0, tzinfo=_dt.UTC
    )
    assert cron.next_after(first) - first == 15 * 60
    either = parse_cron("0 0 13 * fri")  # the 13th or any Friday
    nxt = _dt.datetime.fromtimestamp(either.next_after(start), _dt.UTC)
    assert nxt.day == 9 and nxt.weekday() == 4
    with pytest.raises(InvalidRequestError, match="five years"):
        parse_cron("0 0 31 2 *")
