"""The simulated Anthropic API host on the wire: JSON and SSE shapes checked against the
installed SDK's types, headers, error answers, faults as the wire shows them, and crashes."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pydantic
import trio
from anthropic.types import Message as ApiMessage
from anthropic.types import RawMessageStreamEvent

import kelpie_dst
from kelpie_agent.llm import LlmConnectionError, LlmRequest, Message
from kelpie_dst import Fault
from kelpie_dst.shims.llm import count_tokens, start_anthropic_host

from .workloads import POLICY, WEATHER, sdk_llm, weather_request

HEADERS = {"x-api-key": "sim", "anthropic-version": "2023-06-01"}
BODY: dict[str, Any] = {
    "model": "claude-sim-1",
    "max_tokens": 200,
    "system": [{"type": "text", "text": "You are terse."}],
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "tools": [
        {
            "name": WEATHER.name,
            "description": WEATHER.description,
            "input_schema": dict(WEATHER.input_schema),
        }
    ],
}
EVENTS = pydantic.TypeAdapter(RawMessageStreamEvent)


def run(main: Any, **options: Any) -> Any:
    result = kelpie_dst.run(main, seed=options.pop("seed", 1), **options)
    assert result.ok, result.failure and result.failure.describe()
    return result.value


async def post(body: Any, headers: dict[str, str] = HEADERS, path: str = "/v1/messages") -> Any:
    async with httpx2.AsyncClient(base_url="http://api.anthropic.com") as client:
        raw = json.dumps(body) if not isinstance(body, str) else body
        return await client.post(path, content=raw, headers=headers)


def test_json_answer_has_the_sdk_shape_and_headers() -> None:
    async def main(sim: kelpie_dst.Simulation) -> Any:
        await start_anthropic_host(sim, POLICY)
        return await post(BODY)

    response = run(main)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["request-id"].startswith("req_011")
    message = ApiMessage.model_validate(response.json())  # validates, unlike the SDK's parsing
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].input == {"city": "Paris"}  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use" and message.usage.output_tokens > 0


def test_sse_stream_has_the_exact_event_sequence() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[dict[str, str], str]:
        await start_anthropic_host(sim, POLICY)
        async with (
            httpx2.AsyncClient(base_url="http://api.anthropic.com") as client,
            client.stream(
                "POST", "/v1/messages", json={**BODY, "stream": True}, headers=HEADERS
            ) as response,
        ):
            assert response.status_code == 200
            return dict(response.headers), (await response.aread()).decode()

    headers, text = run(main)
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    assert headers["request-id"].startswith("req_") and "content-length" not in headers
    frames = [f for f in text.split("\n\n") if f]
    names, datas = [], []
    for frame in frames:
        event, data = frame.split("\n")
        name = event.removeprefix("event: ")
        payload = json.loads(data.removeprefix("data: "))
        assert payload["type"] == name
        if name != "ping":
            EVENTS.validate_python(payload)
        names.append(name)
        datas.append(payload)
    text_deltas = names.count("content_block_delta") - sum(
        1 for d in datas if d.get("delta", {}).get("type") == "input_json_delta"
    )
    json_deltas = names.count("content_block_delta") - text_deltas
    expected = [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * text_deltas,
        "content_block_stop",
        "content_block_start",
        *["content_block_delta"] * json_deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert names == expected and text_deltas > 1 and json_deltas >= 1
    blocks = [d["content_block"] for d in datas if d["type"] == "content_block_start"]
    assert blocks[0] == {"type": "text", "text": ""}
    assert blocks[1]["type"] == "tool_use" and blocks[1]["input"] == {}
    arguments = "".join(
        d["delta"]["partial_json"]
        for d in datas
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(arguments) == {"city": "Paris"}
    assert datas[-2]["delta"]["stop_reason"] == "tool_use"
    assert datas[0]["message"]["content"] == [] and datas[0]["message"]["stop_reason"] is None


def _bad(body: Any, headers: dict[str, str] = HEADERS, path: str = "/v1/messages") -> Any:
    async def main(sim: kelpie_dst.Simulation) -> Any:
        await start_anthropic_host(sim, POLICY)
        if path == "GET":
            async with httpx2.AsyncClient(base_url="http://api.anthropic.com") as client:
                return await client.get("/v1/messages", headers=headers)
        return await post(body, headers, path)

    response = run(main)
    payload = response.json()
    assert payload["type"] == "error" and payload["request_id"] == response.headers["request-id"]
    return response.status_code, payload["error"]["type"], payload["error"]["message"]


def test_error_answers() -> None:
    orphan = {**BODY, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "1"}]},
    ]}  # fmt: skip
    image = {**BODY, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}
    cases = [
        (_bad(BODY, {"anthropic-version": "2023-06-01"}), 401, "authentication_error", "x-api-key"),
        (_bad(BODY, {"x-api-key": "k"}), 400, "invalid_request_error", "anthropic-version"),
        (_bad(BODY, path="/v1/complete"), 404, "not_found_error", "/v1/complete"),
        (_bad(BODY, path="GET"), 405, "invalid_request_error", "Method not allowed"),
        (_bad("{not json"), 400, "invalid_request_error", "not valid JSON"),
        (_bad({**BODY, "foo": 1}), 400, "invalid_request_error", "foo: Extra inputs"),
        (_bad({**BODY, "max_tokens": "9"}), 400, "invalid_request_error", "max_tokens: Input"),
        (_bad({k: v for k, v in BODY.items() if k != "model"}), 400, "invalid_request_error",
         "model: Field required"),
        (_bad(image), 400, "invalid_request_error", "messages.0.content.0.type"),
        (_bad(orphan), 400, "invalid_request_error", "unexpected `tool_use_id`"),
    ]  # fmt: skip
    for (status, kind, message), want_status, want_kind, want_text in cases:
        assert (status, kind) == (want_status, want_kind) and want_text in message, message


def test_count_tokens() -> None:
    async def main(sim: kelpie_dst.Simulation) -> Any:
        await start_anthropic_host(sim, POLICY)
        body = {k: v for k, v in BODY.items() if k != "max_tokens"}
        return (await post(body, path="/v1/messages/count_tokens")).json()

    ask = Message.user("What is the weather in Paris?")
    request = LlmRequest("m", [ask], system="You are terse.", tools=[WEATHER])
    assert run(main) == {"input_tokens": count_tokens(request)}


def test_faults_on_the_wire() -> None:
    async def main(sim: kelpie_dst.Simulation) -> Any:
        await start_anthropic_host(sim, POLICY)
        limited = await post(BODY)
        await trio.sleep(1.0)  # past the rate limit's window
        async with (
            httpx2.AsyncClient(base_url="http://api.anthropic.com") as client,
            client.stream(
                "POST", "/v1/messages", json={**BODY, "stream": True}, headers=HEADERS
            ) as response,
        ):
            received = b""
            try:
                async for part in response.aiter_bytes():
                    received += part
            except httpx2.RemoteProtocolError as error:
                return limited, received.decode(), str(error)
        raise AssertionError("the stream was not cut")

    rate = Fault("llm.rate_limited", 1.0, end=0.5, params=(("retry_after", 7.0),))
    cut = Fault("llm.stream_cut", 1.0)
    limited, received, error = run(main, faults=[rate, cut])
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert received.startswith("event: message_start") and "message_stop" not in received
    assert "incomplete chunked read" in error


def test_host_crash_and_restart() -> None:
    async def main(sim: kelpie_dst.Simulation) -> tuple[str, str]:
        host = await start_anthropic_host(sim, POLICY)
        llm = sdk_llm(host.base_url, max_retries=0)
        assert host.node is not None
        sim.crash(host.node)
        await trio.sleep(0.1)
        down = "answered"
        try:
            await llm.complete(weather_request("weather in Paris"))
        except LlmConnectionError as error:
            down = type(error).__name__
        sim.restart(host.node, after=1.0)
        await trio.sleep(2.0)
        response = await llm.complete(weather_request("weather in Paris"))
        return down, response.tool_calls[0].name

    assert run(main) == ("LlmConnectionError", "get_weather")


def test_too_large_bodies_are_refused(monkeypatch: Any) -> None:
    from kelpie_dst.shims.llm import _api_host

    monkeypatch.setattr(_api_host, "MAX_BODY", 100)
    status, kind, message = _bad(BODY)
    assert (status, kind) == (413, "request_too_large") and "100" in message


def test_gateway_errors_answer_failures_in_plain_text() -> None:
    """With ``gateway_errors`` a failure keeps its status and headers but loses Anthropic's
    error JSON, and the real adapter still maps it by its status (a rate limit, its wait)."""
    from kelpie_agent.llm import LlmRateLimitedError

    async def main(sim: kelpie_dst.Simulation) -> Any:
        host = await start_anthropic_host(sim, POLICY, gateway_errors=1.0)
        limited = await post(BODY)
        llm = sdk_llm(host.base_url, max_retries=0)
        try:
            await llm.complete(weather_request("weather in Paris"))
        except LlmRateLimitedError as error:
            return limited, error.retry_after
        raise AssertionError("the adapter did not see a rate limit")

    rate = Fault("llm.rate_limited", 1.0, params=(("retry_after", 7.0),))
    limited, wait = run(main, faults=[rate])
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert limited.headers["content-type"] == "text/plain"
    assert limited.text == "429 Too Many Requests" and wait == 7.0


def test_gateway_errors_must_be_a_share() -> None:
    async def main(sim: kelpie_dst.Simulation) -> None:
        await start_anthropic_host(sim, POLICY, gateway_errors=1.5)

    result = kelpie_dst.run(main, seed=1)
    assert not result.ok and "gateway_errors must be in [0, 1]" in result.failure.describe()
