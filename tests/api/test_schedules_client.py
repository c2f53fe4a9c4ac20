"""``agents.schedule`` create/list/retrieve/delete through the real letta-client with strict
response validation; the node's scheduler sends the messages at their time (virtual time);
bad schedules are 422s naming the field. Same seed, same trace hash."""

from __future__ import annotations

import httpx
import letta_client
import pytest
import trio
from letta_client import AsyncLetta

import kelpie_dst
from kelpie_dst.shims import sim_ports

from .harness import BASE, api
from .test_letta_client import GUARDS

HELLO = [{"role": "user", "content": "scheduled hello"}]


def _now() -> float:
    return sim_ports(kelpie_dst.current_simulation().current_node()).clock.now()  # type: ignore[union-attr, arg-type]


async def _scheduled(client: AsyncLetta, agent_id: str) -> list[str]:
    page = await client.agents.messages.list(agent_id, limit=200, order="asc")
    return [
        m.otid or ""
        for m in page.items
        if m.message_type == "user_message" and m.content == "scheduled hello"
    ]


async def schedules_flow() -> list[str]:
    async with api() as a:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=a.app), base_url=BASE)
        client = AsyncLetta(
            base_url=BASE, http_client=http, max_retries=0, _strict_response_validation=True
        )
        otto = await client.agents.create(name="otto")
        at_ms = round((_now() + 20) * 1000)
        once = await client.agents.schedule.create(
            otto.id, messages=HELLO, schedule={"scheduled_at": at_ms}, max_steps=3
        )
        await trio.sleep(1)  # listed in creation order (ids break ties)
        every = await client.agents.schedule.create(
            otto.id,
            messages=[{"role": "user", "content": [{"type": "text", "text": "scheduled hello"}]}],
            schedule={"type": "recurring", "cron_expression": "*/2 * * * *"},
        )
        assert once.next_scheduled_at is not None and every.next_scheduled_at is not None
        got = await client.agents.schedule.retrieve(once.id, agent_id=otto.id)
        assert got.schedule.type in (None, "one-time") and got.message.max_steps == 3
        assert got.schedule.scheduled_at == at_ms  # type: ignore[union-attr]
        assert [m.content for m in got.message.messages] == ["scheduled hello"]
        listed = await client.agents.schedule.list(otto.id)
        assert [s.id for s in listed.scheduled_messages] == [once.id, every.id]
        assert not listed.has_next_page
        first = await client.agents.schedule.list(otto.id, limit="1")
        assert [s.id for s in first.scheduled_messages] == [once.id] and first.has_next_page
        rest = await client.agents.schedule.list(otto.id, after=once.id)
        assert [s.id for s in rest.scheduled_messages] == [every.id]
        await trio.sleep(25)
        assert len(await _scheduled(client, otto.id)) >= 1  # the one-time one, at its time
        listed = await client.agents.schedule.list(otto.id)
        assert [s.id for s in listed.scheduled_messages] == [every.id]  # sent: gone
        await trio.sleep(240)
        sent = await _scheduled(client, otto.id)
        assert len(sent) == len(set(sent)) >= 3
        deleted = await client.agents.schedule.delete(every.id, agent_id=otto.id)
        assert deleted.success is True
        await trio.sleep(130)
        assert await _scheduled(client, otto.id) == sent  # nothing after the delete
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.schedule.retrieve(every.id, agent_id=otto.id)
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.schedule.delete(every.id, agent_id=otto.id)
        with pytest.raises(letta_client.NotFoundError):
            await client.agents.schedule.list("agent-missing")
        bad = [
            ({"type": "recurring", "cron_expression": "0 25 * * *"}, "schedule.cron_expression"),
            ({"scheduled_at": (_now() - 3600) * 1000}, "schedule.scheduled_at"),
            ({"scheduled_at": 1.7e16}, "schedule.scheduled_at"),  # after year 9999: was a 500
            ({"type": "recurring"}, "schedule.cron_expression"),
            ({"type": "one-time"}, "schedule.scheduled_at"),
        ]
        for schedule, field in bad:
            with pytest.raises(letta_client.UnprocessableEntityError, match=field):
                await client.agents.schedule.create(otto.id, messages=HELLO, schedule=schedule)  # type: ignore[arg-type]
        with pytest.raises(letta_client.UnprocessableEntityError, match="messages"):
            await client.agents.schedule.create(otto.id, messages=[], schedule={"scheduled_at": 1})
        with pytest.raises(letta_client.UnprocessableEntityError, match="callback_url"):
            await client.agents.schedule.create(
                otto.id, messages=HELLO, schedule={"scheduled_at": at_ms}, callback_url="http://x"
            )
        await http.aclose()
    kelpie_dst.log("api.answer", body=" ".join(sent))
    return sent


@pytest.mark.dst(seeds=2, **GUARDS)
async def test_schedules_through_letta_client() -> None:
    await schedules_flow()


def test_schedules_same_seed_same_trace_hash() -> None:
    kelpie_dst.assert_deterministic(schedules_flow, seeds=(1,), runs=2, **GUARDS)
