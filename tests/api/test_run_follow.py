"""Following a run from storage (``AgentService.follow_run``, behind ``POST
/v1/runs/{id}/stream``): numbering, resuming, and a follower that leaves mid-run."""

from __future__ import annotations

import pytest
import trio

from kelpie_agent.agent import InputMessage, StreamEvent
from kelpie_agent.service import InvalidError, NotFoundError
from kelpie_dst.shims import LlmTiming

from .harness import AGENT, STRICT, api

SLOW = LlmTiming(ttft_min=5.0, ttft_max=5.0)


@pytest.mark.dst(seeds=1, **STRICT)  # same-seed determinism: test_letta_client_runs.py
async def test_a_follower_that_leaves_stops_the_polling_and_not_the_run() -> None:
    async with api(timing=SLOW) as a:
        agent = (await a.client.post("/v1/agents/", json=AGENT)).json()["id"]
        service = a.service
        run = await service.start_run(agent, (InputMessage("user", "Hi"),))
        assert run.status == "running"
        sender, receiver = trio.open_memory_channel[StreamEvent](0)
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: service.follow_run(run.id, sender, poll_interval=0.5))
                first = await receiver.receive()  # the input, committed before the model call
                assert first.id and first.run_id == run.id  # type: ignore[union-attr]
                await receiver.aclose()  # the follower leaves while the model thinks
            # follow_run returned on its own (the nursery closed): no task polls any more
        await trio.sleep(60)
        done = await service.get_run(run.id)
        assert done.status == "completed"  # the run went on without anyone following it
        late, out = trio.open_memory_channel[StreamEvent](16)
        await service.follow_run(run.id, late, starting_after=1)
        events = [e async for e in out]
        stored = await service.run_messages(run.id)
        assert len(stored) >= 2 and stored[0].id == first.id  # type: ignore[union-attr]
        assert [e.id for e in events[:-2]] == [m.id for m in stored[1:]]  # type: ignore[union-attr]
        assert [type(e).__name__ for e in events[-2:]] == ["LettaStopReason", "LettaUsage"]
        with pytest.raises(InvalidError):
            await service.follow_run(
                run.id, trio.open_memory_channel[StreamEvent](1)[0], poll_interval=0
            )
        with pytest.raises(NotFoundError):
            await service.follow_run(
                run.id, trio.open_memory_channel[StreamEvent](1)[0], agent_id="agent-other"
            )
