"""AnthropicLlm's translations: SDK exceptions to port errors, port values to SDK params."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from kelpie_agent.llm import (
    AnthropicLlm,
    LlmBadRequestError,
    LlmConnectionError,
    LlmError,
    LlmOverloadedError,
    LlmRateLimitedError,
    LlmServerError,
    LlmStreamCutError,
    LlmTimeoutError,
    Message,
    TextBlock,
    Tool,
    ToolCall,
    ToolResult,
)
from kelpie_agent.llm._anthropic import _message_param, _tool_param, map_error

REQUEST = httpx2.Request("POST", "http://api.anthropic.com/v1/messages")


def status_error(status: int, kind: str | None, headers: dict[str, str] | None = None) -> Any:
    body = {"type": "error", "error": {"type": kind, "message": "m"}} if kind else None
    response = httpx2.Response(status, headers=headers or {}, request=REQUEST)
    client = anthropic.AsyncAnthropic(api_key="k", base_url="http://x")
    return client._make_status_error("boom", body=body, response=response)


@pytest.mark.parametrize(
    ("error", "expected", "status"),
    [
        (status_error(400, "invalid_request_error"), LlmBadRequestError, 400),
        (status_error(401, "authentication_error"), LlmBadRequestError, 401),
        (status_error(404, "not_found_error"), LlmBadRequestError, 404),
        (status_error(408, None), LlmTimeoutError, 408),
        (status_error(429, "rate_limit_error", {"retry-after": "3"}), LlmRateLimitedError, 429),
        (status_error(500, "api_error"), LlmServerError, 500),
        (status_error(503, None), LlmServerError, 503),
        (status_error(504, "timeout_error"), LlmTimeoutError, 504),
        (status_error(529, "overloaded_error"), LlmOverloadedError, 529),
        (status_error(200, "overloaded_error"), LlmOverloadedError, 200),  # an SSE error event
        (anthropic.APITimeoutError(request=REQUEST), LlmTimeoutError, None),
        (anthropic.APIConnectionError(request=REQUEST), LlmConnectionError, None),
        (anthropic.AnthropicError("odd"), LlmError, None),
    ],
)
def test_sdk_errors_map_to_port_errors(error: Any, expected: type, status: int | None) -> None:
    mapped = map_error(error)
    assert type(mapped) is expected and mapped.status == status


def test_retry_after_and_midstream_errors() -> None:
    limited = map_error(status_error(429, "rate_limit_error", {"retry-after-ms": "1500"}))
    assert isinstance(limited, LlmRateLimitedError) and limited.retry_after == 1.5
    dated = map_error(status_error(429, None, {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}))
    assert isinstance(dated, LlmRateLimitedError) and dated.retry_after is None
    cut = map_error(anthropic.APIConnectionError(request=REQUEST), midstream=True)
    assert isinstance(cut, LlmStreamCutError)
    other = map_error(status_error(200, "invalid_request_error"), midstream=True)
    assert isinstance(other, LlmServerError)


def test_values_become_sdk_params() -> None:
    broken = ToolCall("toolu_2", "f", '{"x": ')
    assistant = Message(
        "assistant", (TextBlock("hm"), ToolCall.of("toolu_1", "f", {"x": 1}), broken)
    )
    assert _message_param(assistant) == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "hm"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}},
            {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}},  # malformed
        ],
    }
    results = Message.tool_results(ToolResult("toolu_1", "ok"), ToolResult("toolu_2", "bad", True))
    assert _message_param(results)["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "bad", "is_error": True},
    ]
    schema = {"type": "object", "properties": {}}
    assert _tool_param(Tool("f", "", schema)) == {"name": "f", "input_schema": schema}
    assert _tool_param(Tool("f", "does", schema))["description"] == "does"


def test_bad_options_raise_one_line_errors() -> None:
    with pytest.raises(ValueError, match="max_retries must be >= 0"):
        AnthropicLlm(api_key="k", max_retries=-1)
    with pytest.raises(ValueError, match="timeout must be > 0 seconds"):
        AnthropicLlm(api_key="k", timeout=0)
