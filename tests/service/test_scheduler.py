"""The node's scheduler: it sends scheduled messages at their time (virtual time here), sleeps
when nothing is due (no polling storm), survives storage failures, and a restarted node sends
what came due while it was down; the service's schedule calls validate their input."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import InputMessage, UserMessage
from kelpie_agent.agent._schedules import DUE
from kelpie_agent.service import AgentService, InvalidError, NotFoundError
from kelpie_agent.service import _schedules as schedules
from kelpie_dst.shims import open_kv, sim_ports

from .harness import otto, service_node

HELLO = (InputMessage("user", "scheduled hello"),)


def _now() -> float:
    node = kelpie_dst.current_simulation().current_node()  # type: ignore[union-attr]
    return sim_ports(node).clock.now()


async def _sent(service: AgentService, agent_id: str) -> list[UserMessage]:
    messages = await service.list_messages(agent_id, limit=1000)
    return [m for m in messages if isinstance(m, UserMessage) and m.content == "scheduled hello"]


class CountingKV:
    """A KV that counts scans of the due index (to see that an idle node does not poll)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.due_scans = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def scan(self, start: bytes = b"", *args: Any, **kwargs: Any) -> Any:
        if start.startswith(DUE):
            self.due_scans += 1
        return await self.inner.scan(start, *args, **kwargs)


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_one_time_schedule_is_sent_at_its_time_and_a_recurring_one_every_minute() -> None:
    async with service_node() as service:
        agent = (await service.create_agent(otto())).agent
        at = _now() + 20
        once = await schedules.create_schedule(
            service, agent.id, HELLO, {"type": "one-time", "scheduled_at": at * 1000}
        )
        await trio.sleep(15)
        assert await _sent(service, agent.id) == []  # not early
        await trio.sleep(15)
        sent = await _sent(service, agent.id)
        assert [m.otid for m in sent] == [f"sched-{once.id}-{round(at * 1e6):x}"]
        assert sent[0].date >= at
        with pytest.raises(NotFoundError):  # a one-time schedule is gone once sent
            await schedules.get_schedule(service, agent.id, once.id)
        every = await schedules.create_schedule(
            service, agent.id, HELLO, {"type": "recurring", "cron_expression": "* * * * *"}
        )
        await trio.sleep(185)
        listed, more = await schedules.list_schedules(service, agent.id)
        assert [r.id for r in listed] == [every.id] and not more
        await schedules.delete_schedule(service, agent.id, every.id)
        recurring = [m for m in await _sent(service, agent.id) if every.id in (m.otid or "")]
        assert len(recurring) == 3 and len({m.otid for m in recurring}) == 3
        for m in recurring:  # each at its minute, never before
            due = int((m.otid or "").rsplit("-", 1)[1], 16) / 1e6
            assert due % 60 == 0 and due <= m.date < due + 10
        await trio.sleep(120)
        assert len(await _sent(service, agent.id)) == 4  # nothing after the delete


@pytest.mark.dst(seeds=2, guards="strict")
async def test_an_idle_node_scans_once_per_rescan_period() -> None:
    node = kelpie_dst.current_simulation().current_node()  # type: ignore[union-attr]
    kv = CountingKV(open_kv(node))
    async with service_node(kv=kv) as service:
        await service.create_agent(otto())
        await trio.sleep(300)
        assert kv.due_scans <= 300 / service.options.schedule_rescan + 2


@pytest.mark.dst(seeds=3, guards="strict", faults=["storage.read_fail=0.3"])
async def test_the_scheduler_outlives_storage_failures() -> None:
    async with service_node() as service:
        for _ in range(20):  # create the agent despite the failures
            try:
                agent = (await service.create_agent(otto())).agent
                break
            except Exception:
                await trio.sleep(1)
        at = _now() + 10
        for _ in range(20):
            try:
                await schedules.create_schedule(
                    service, agent.id, HELLO, {"type": "one-time", "scheduled_at": at * 1000}
                )
                break
            except Exception:
                await trio.sleep(1)
        await trio.sleep(90)
        sent: list[UserMessage] = []
        for _ in range(20):
            try:
                sent = await _sent(service, agent.id)
                break
            except Exception:
                await trio.sleep(1)
        assert len(sent) == 1


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_node_that_was_down_sends_what_came_due_meanwhile(
    dst: kelpie_dst.Simulation,
) -> None:
    db = dst.add_node("db")
    ids: dict[str, str] = {}

    async def server(node: kelpie_dst.Node) -> None:
        async with service_node(kv=open_kv(node, host=db)) as service:
            if "agent" not in ids:
                agent = (await service.create_agent(otto())).agent
                ids["agent"] = agent.id
                await schedules.create_schedule(
                    service,
                    agent.id,
                    HELLO,
                    {"type": "one-time", "scheduled_at": (_now() + 5) * 1e3},
                )
                ids["created"] = "yes"
            await trio.sleep_forever()

    node = dst.add_node("server", server)
    while "created" not in ids:
        await trio.sleep(0.1)
    dst.crash(node)  # before it was due
    await trio.sleep(60)
    dst.restart(node)
    await trio.sleep(30)
    kv = open_kv(dst.current_node(), host=db)  # type: ignore[arg-type]
    assert await kv.scan_prefix(DUE) == []  # sent: the entry is gone


@pytest.mark.dst(seeds=1, guards="strict")
async def test_bad_schedules_are_refused_naming_the_field() -> None:
    async with service_node() as service:
        agent = (await service.create_agent(otto())).agent
        cases: list[tuple[dict[str, Any], str]] = [
            ({"type": "recurring", "cron_expression": "61 * * * *"}, "schedule.cron_expression"),
            ({"type": "recurring", "cron_expression": "* *"}, "schedule.cron_expression"),
            ({"type": "one-time", "scheduled_at": (_now() - 3600) * 1000}, "schedule.scheduled_at"),
            ({"type": "one-time"}, "schedule.scheduled_at"),
            ({"type": "weekly"}, "schedule.type"),
        ]
        for schedule, field in cases:
            with pytest.raises(InvalidError) as caught:
                await schedules.create_schedule(service, agent.id, HELLO, schedule)
            assert caught.value.field == field and caught.value.status == 422, caught.value
        with pytest.raises(NotFoundError):
            await schedules.delete_schedule(service, agent.id, "scheduled_message-nope")
        with pytest.raises(NotFoundError):
            await schedules.create_schedule(
                service, "agent-nope", HELLO, {"type": "recurring", "cron_expression": "* * * * *"}
            )
