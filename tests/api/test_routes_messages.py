"""Messages over HTTP: JSON and streamed sends, token streaming, pings, filters, history
pages, reset, async runs, cancel, and the request checks."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from kelpie_dst.shims import LlmTiming, ScriptedPolicy

from ..agent.harness import CountingPolicy
from .harness import AGENT, STRICT, api, sse_frames

ECHO = ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "echo: {text}"}]})


async def _agent(client: httpx.AsyncClient, **fields: Any) -> str:
    response = await client.post("/v1/agents/", json={**AGENT, **fields})
    assert response.status_code == 200, response.text
    agent_id: str = response.json()["id"]
    return agent_id


@pytest.mark.dst(seeds=2, **STRICT)
async def test_a_json_send_answers_a_letta_response() -> None:
    async with api() as a:
        agent = await _agent(a.client)
        response = await a.client.post(
            f"/v1/agents/{agent}/messages",
            json={"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert [m["message_type"] for m in body["messages"]] == ["assistant_message"]
        message = body["messages"][0]
        assert message["content"] == "Hello! How can I help you today?"
        assert message["id"].startswith("message-") and message["run_id"].startswith("run-")
        assert body["stop_reason"] == {"message_type": "stop_reason", "stop_reason": "end_turn"}
        usage = body["usage"]
        assert usage["message_type"] == "usage_statistics" and usage["step_count"] == 1
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
        raw = await a.client.post(
            f"/v1/agents/{agent}/messages",
            json={"input": "Hi again", "use_assistant_message": False},
        )
        kinds = [m["message_type"] for m in raw.json()["messages"]]
        assert "tool_call_message" in kinds and "assistant_message" not in kinds
        only = await a.client.post(
            f"/v1/agents/{agent}/messages",
            json={
                "input": "Hi",
                "use_assistant_message": False,
                "include_return_message_types": ["tool_return_message"],
            },
        )
        assert {m["message_type"] for m in only.json()["messages"]} == {"tool_return_message"}


@pytest.mark.dst(seeds=2, **STRICT)
async def test_streams_end_with_stop_reason_usage_and_done() -> None:
    async with api(policy=ECHO, timing=LlmTiming()) as a:
        agent = await _agent(a.client, agent_type="letta_v1_agent")
        for path, extra in (("messages", {"streaming": True}), ("messages/stream", {})):
            response = await a.client.post(
                f"/v1/agents/{agent}/{path}", json={"input": "hello", **extra}
            )
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            frames = sse_frames(response.text)
            assert frames[-1] == "[DONE]"
            assert [f["message_type"] for f in frames[-3:-1]] == ["stop_reason", "usage_statistics"]
            assert [f["content"] for f in frames[:-3]] == ["echo: hello"]
        tokens = await a.client.post(
            f"/v1/agents/{agent}/messages/stream",
            json={"input": "piece by piece", "stream_tokens": True},
        )
        pieces = [f for f in sse_frames(tokens.text)[:-3]]
        assert len(pieces) > 1 and len({p["id"] for p in pieces}) == 1
        assert "".join(p["content"] for p in pieces) == "echo: piece by piece"
        history = (await a.client.get(f"/v1/agents/{agent}/messages?order=asc")).json()
        assert history[-1]["id"] == pieces[0]["id"]
        assert history[-1]["content"] == "echo: piece by piece"


@pytest.mark.dst(seeds=1, **STRICT)
async def test_slow_runs_get_pings_unless_turned_off() -> None:
    slow = LlmTiming(ttft_min=40.0, ttft_max=40.0)
    async with api(policy=ECHO, timing=slow, ping_interval=10) as a:
        agent = await _agent(a.client, agent_type="letta_v1_agent")
        with_pings = await a.client.post(f"/v1/agents/{agent}/messages/stream", json={"input": "x"})
        frames = sse_frames(with_pings.text)
        pings = [f for f in frames if f != "[DONE]" and f["message_type"] == "ping"]
        assert len(pings) >= 3 and all(p["id"].startswith("ping-") and p["date"] for p in pings)
        quiet = await a.client.post(
            f"/v1/agents/{agent}/messages/stream", json={"input": "x", "include_pings": False}
        )
        assert all(f == "[DONE]" or f["message_type"] != "ping" for f in sse_frames(quiet.text))


@pytest.mark.dst(seeds=1, **STRICT)
async def test_stream_errors_before_the_first_frame_are_plain_json() -> None:
    async with api() as a:
        missing = await a.client.post("/v1/agents/agent-nope/messages/stream", json={"input": "x"})
        assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
        agent = await _agent(a.client)
        empty = await a.client.post(f"/v1/agents/{agent}/messages/stream", json={"input": " "})
        assert empty.status_code == 422 and "body.input" in empty.json()["detail"]
        assert "must not be blank" in empty.json()["detail"]


@pytest.mark.dst(seeds=1, **STRICT)
async def test_send_requests_are_checked() -> None:
    async with api() as a:
        agent = await _agent(a.client)
        url = f"/v1/agents/{agent}/messages"
        both = {"input": "a", "messages": [{"role": "user", "content": "b"}]}
        cases: list[tuple[dict[str, Any], str]] = [
            ({}, "exactly one of 'messages' and 'input'"),
            (both, "exactly one of 'messages' and 'input'"),
            ({"input": "x", "stream_tokens": True}, "body.stream_tokens"),
            ({"input": "x", "include_pings": False}, "body.include_pings"),
            ({"messages": [{"role": "tool", "content": "x"}]}, "body.messages[0].role"),
            ({"input": [{"type": "image", "text": "x"}]}, "body.input"),
            ({"input": "x", "max_steps": 0}, "body.max_steps"),
            ({"input": "x", "include_return_message_types": ["nope"]}, "include_return"),
        ]
        for body, expected in cases:
            response = await a.client.post(url, json=body)
            assert response.status_code == 422, (body, response.text)
            assert expected in response.json()["detail"], (body, response.json())
        missing = await a.client.post("/v1/agents/agent-nope/messages", json={"input": "x"})
        assert missing.status_code == 404


@pytest.mark.dst(seeds=2, **STRICT)
async def test_history_pages_follow_cursors_and_reset_clears_them() -> None:
    async with api(policy=ECHO) as a:
        c = a.client
        agent = await _agent(c, agent_type="letta_v1_agent")
        for i in range(4):
            assert (
                await c.post(f"/v1/agents/{agent}/messages", json={"input": f"m{i}"})
            ).is_success
        everything = (await c.get(f"/v1/agents/{agent}/messages?order=asc&limit=1000")).json()
        system = everything[0]
        assert system["message_type"] == "system_message" and system["run_id"] is None
        assert "<memory_blocks>" in system["content"]
        assert [m.get("content") for m in everything[1:]] == [
            x for i in range(4) for x in (f"m{i}", f"echo: m{i}")
        ]
        for order in ("asc", "desc"):
            expected = [m["id"] for m in (everything if order == "asc" else everything[::-1])]
            seen: list[str] = []
            params: dict[str, Any] = {"limit": 3, "order": order}
            for _ in range(10):
                page = (await c.get(f"/v1/agents/{agent}/messages", params=params)).json()
                if not page:
                    break
                seen += [m["id"] for m in page]
                params["after"] = page[-1]["id"]
            assert seen == expected
        newest = (await c.get(f"/v1/agents/{agent}/messages", params={"limit": 1})).json()
        assert newest[0]["content"] == "echo: m3"  # default order: desc
        users = (
            await c.get(
                f"/v1/agents/{agent}/messages",
                params={"include_return_message_types": ["user_message"], "limit": 3},
            )
        ).json()
        assert [m["content"] for m in users] == ["m3", "m2", "m1"]
        bad = await c.get(f"/v1/agents/{agent}/messages", params={"after": "message-nope"})
        assert bad.status_code == 404 and "after" in bad.json()["detail"]
        reset = await c.patch(f"/v1/agents/{agent}/reset-messages")
        assert reset.status_code == 200 and reset.json()["id"] == agent
        [kept] = (await c.get(f"/v1/agents/{agent}/messages")).json()  # Letta keeps message 0
        assert kept["id"] == system["id"] and kept["message_type"] == "system_message"


COUNT = '''def count(n: int) -> str:
    """Count.

    Args:
        n: the number
    """
    return str(n)
'''


@pytest.mark.dst(seeds=2, **STRICT)
async def test_async_runs_finish_in_the_background() -> None:
    async with api(timing=LlmTiming(ttft_min=5.0, ttft_max=5.0)) as a:
        c = a.client
        agent = await _agent(c)
        run = await c.post(f"/v1/agents/{agent}/messages/async", json={"input": "Hi"})
        assert run.status_code == 200, run.text
        body = run.json()
        assert body["id"].startswith("run-") and body["agent_id"] == agent
        assert body["status"] in ("running", "completed")
        await trio.sleep(60)
        history = (await c.get(f"/v1/agents/{agent}/messages?order=asc")).json()
        types = [m["message_type"] for m in history[:4]]  # a memgpt agent's first messages
        assert types == ["system_message", "reasoning_message", "assistant_message", "user_message"]
        assert history[4]["content"] == "Hi" and history[-1]["run_id"] == body["id"]
        assert history[-1]["message_type"] == "assistant_message"
        missing = await c.post("/v1/agents/agent-x/messages/async", json={"input": "x"})
        assert missing.status_code == 404


@pytest.mark.dst(seeds=2, **STRICT)
async def test_cancel_stops_a_running_send_between_steps() -> None:
    async with api(policy=CountingPolicy("count", calls=50)) as a:
        c = a.client
        tool = (await c.post("/v1/tools/", json={"source_code": COUNT})).json()
        agent = await _agent(c, agent_type="letta_v1_agent", tool_ids=[tool["id"]])
        stopped: list[str] = []

        async def send() -> None:
            response = await c.post(f"/v1/agents/{agent}/messages", json={"input": "count"})
            stopped.append(response.json()["stop_reason"]["stop_reason"])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            await trio.sleep(2)
            cancel = await c.post(f"/v1/agents/{agent}/messages/cancel", json={})
            assert cancel.status_code == 200 and cancel.json() == {"cancelled": 1}
        assert stopped == ["cancelled"]
        assert (await c.post(f"/v1/agents/{agent}/messages/cancel")).json() == {"cancelled": 0}
        assert (await c.post("/v1/agents/agent-x/messages/cancel")).status_code == 404
