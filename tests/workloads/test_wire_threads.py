"""The wire_threads follow check, and sends the MCP client gave up on (apiS, session 22)."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing

from kelpie_agent.mcp import McpConnectionError
from kelpie_dst.workloads._agent_oracles import Applied, check_resends
from kelpie_dst.workloads._agent_world import Journal, RecordingMcp
from kelpie_dst.workloads._wire_threads import FollowSeen, _runs, check_follows


def test_a_follow_of_the_thread_s_latest_run_passes() -> None:
    assert check_follows([FollowSeen("bg 0", "run-1", ("run-1",))]) == []


def test_a_follow_that_shows_another_thread_s_run_fails() -> None:
    [problem] = check_follows([FollowSeen("follow default", "run-1", ("run-3",))])
    assert "run-3" in problem and "not run-1" in problem


def test_a_background_send_whose_frames_name_two_runs_fails() -> None:
    [problem] = check_follows([FollowSeen("bg 1", None, ("run-1", "run-2"))])
    assert "not one run" in problem


def test_runs_are_named_once_in_order() -> None:
    frames = [{"run_id": "b"}, {"run_id": "a"}, {"run_id": "b"}, {"message_type": "ping"}]
    assert _runs(frames) == ("b", "a")


@attrs.frozen
class _Config:
    call_timeout: float


class _SlowClient:
    """Waits ``wait`` seconds, then fails the call as a broken connection."""

    def __init__(self, wait: float) -> None:
        self.wait = wait

    def config(self, server: str) -> _Config:
        return _Config(call_timeout=10.0)

    async def call_tool(self, server: str, tool: str, arguments: Any, *, timeout: Any) -> Any:
        await trio.sleep(self.wait)
        raise McpConnectionError("mcp server 's': gone", server=server)


def _sent(wait: float) -> bool:
    journal = Journal()
    mcp = RecordingMcp(_SlowClient(wait), journal)  # type: ignore[arg-type]

    async def call() -> None:
        try:
            await mcp.call_tool("s", "send", {"request_id": "k1", "text": "x"})
        except McpConnectionError:
            pass

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, name="kelpie_agent.actor[agent/a]")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    [sent] = journal.sent
    return sent.timed_out


def test_a_failure_after_the_whole_timeout_is_a_send_the_client_gave_up_on() -> None:
    assert _sent(10.0) is True


def test_a_failure_before_the_timeout_is_a_failed_send_too() -> None:
    # the server may have died after running it (mcp.effect_crash): check_resends judges it
    # by whether its effect happened meanwhile, whatever the client raised (Dlead25-1)
    assert _sent(1.0) is True


def test_a_resend_after_a_gave_up_send_that_took_effect_is_a_double() -> None:
    from kelpie_dst.workloads._agent_oracles import Sent

    sent = [
        Sent("act#1", "k1", "send", True, 0.0, 10.0),
        Sent("act#1", "k1", "send", False, 11, 12),
    ]
    applied = [Applied(1, 5.0, "k1", "n", "mcp:send"), Applied(2, 11.5, "k1", "n", "mcp:send")]
    [problem] = check_resends(sent, applied)
    assert "sent it again" in problem
