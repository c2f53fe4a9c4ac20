"""The SSE response on its own: frame format and order, pings, filtering, errors before and
after the first frame, and a client that disconnects mid-stream (the producer finishes)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from kelpie_agent.agent import (
    AgentNotFoundError,
    AgentStorageError,
    AssistantMessage,
    LettaStopReason,
    LettaUsage,
    ReasoningMessage,
    StreamEvent,
)
from kelpie_agent.api._sse import DONE, SseResponse

Channel = trio.MemorySendChannel[StreamEvent]


def _assistant(i: int, text: str = "hi") -> AssistantMessage:
    return AssistantMessage(id=f"message-{i}", date=1_700_000_000.0, content=text)


async def _call(response: SseResponse, receive: Any = None) -> tuple[int, dict[str, str], bytes]:
    """Run the ASGI response; returns (status, headers, body)."""
    sent: list[dict[str, Any]] = []
    finished = trio.Event()

    async def default_receive() -> dict[str, Any]:
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            finished.set()

    scope = {"type": "http", "method": "POST", "path": "/x", "headers": []}
    await response(scope, receive or default_receive, send)
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], headers, body


def _frames(body: bytes) -> list[str]:
    return [chunk for chunk in body.decode().split("\n\n") if chunk]


@pytest.mark.dst(seeds=1)
async def test_frames_come_in_order_and_end_with_done() -> None:
    async def producer(channel: Channel) -> None:
        async with channel:
            await channel.send(ReasoningMessage(id="message-0", date=0.0, reasoning="hm"))
            await channel.send(_assistant(1))
            await channel.send(LettaStopReason("end_turn"))
            await channel.send(LettaUsage(3, 4, 1))

    status, headers, body = await _call(SseResponse(producer, ping_interval=1000))
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    frames = _frames(body)
    assert all(f.startswith("data: ") for f in frames), frames
    assert frames[-1] == "data: [DONE]"
    payloads = [json.loads(f[len("data: ") :]) for f in frames[:-1]]
    assert [p["message_type"] for p in payloads] == [
        "reasoning_message",
        "assistant_message",
        "stop_reason",
        "usage_statistics",
    ]
    assert payloads[1]["content"] == "hi" and payloads[1]["date"] == "2023-11-14T22:13:20+00:00"
    assert payloads[3] == {
        "message_type": "usage_statistics",
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
        "step_count": 1,
    }
    assert body.endswith(DONE)


@pytest.mark.dst(seeds=1)
async def test_quiet_periods_get_pings_and_the_filter_drops_message_types() -> None:
    async def producer(channel: Channel) -> None:
        async with channel:
            await channel.send(ReasoningMessage(id="message-0", date=0.0, reasoning="hm"))
            await trio.sleep(25)  # two and a half ping intervals
            await channel.send(_assistant(1))
            await channel.send(LettaStopReason("end_turn"))

    response = SseResponse(
        producer,
        keep=lambda frame: frame["message_type"] != "reasoning_message",
        ping=lambda: {"message_type": "ping", "id": "ping-x", "date": "2024-01-01T00:00:00Z"},
        ping_interval=10,
    )
    _, _, body = await _call(response)
    kinds = [json.loads(f[6:])["message_type"] for f in _frames(body)[:-1]]
    assert kinds == ["ping", "ping", "assistant_message", "stop_reason"]


@pytest.mark.dst(seeds=1)
async def test_a_failure_before_the_first_frame_is_a_json_error_with_its_status() -> None:
    async def producer(channel: Channel) -> None:
        raise AgentNotFoundError("agent-nope")

    status, headers, body = await _call(SseResponse(producer))
    assert status == 404
    assert headers["content-type"] == "application/json"
    assert headers["x-should-retry"] == "false"
    assert json.loads(body) == {"detail": "agent 'agent-nope' not found"}


@pytest.mark.dst(seeds=1)
async def test_a_failure_after_the_first_frame_is_an_error_event_then_done() -> None:
    async def producer(channel: Channel) -> None:
        await channel.send(_assistant(1))
        raise AgentStorageError("writing failed 8 times")

    status, _, body = await _call(SseResponse(producer))
    assert status == 200
    frames = _frames(body)
    assert frames[0].startswith("data: ")
    assert frames[1].startswith("event: error\ndata: ")
    error = json.loads(frames[1].split("data: ", 1)[1])
    assert error["status_code"] == 503 and "writing failed" in error["detail"]
    assert frames[2] == "data: [DONE]"


@pytest.mark.dst(seeds=1)
async def test_a_client_that_disconnects_stops_the_stream_but_not_the_producer() -> None:
    first_sent = trio.Event()
    produced: list[str] = []

    async def receive() -> dict[str, Any]:
        await first_sent.wait()
        return {"type": "http.disconnect"}

    async def producer(channel: Channel) -> None:
        async with channel:
            for i in range(5):
                try:
                    await channel.send(_assistant(i))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    produced.append("dropped")
                    break
                produced.append(f"sent {i}")
                if i == 0:
                    first_sent.set()
                await trio.sleep(1)
        produced.append("finished")

    response = SseResponse(producer, ping_interval=1000)
    status, _, body = await _call(response, receive)
    assert status == 200
    assert response.disconnected
    assert not body.endswith(DONE)
    assert produced[-2:] == ["dropped", "finished"], produced
