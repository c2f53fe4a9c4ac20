"""The LLM fault domain: failures of a model call, decided at the port and at the API host.

Faults (all probabilities default to zero; see docs/llm.md and docs/faults.md):

============================ ================================================================
``llm.timeout``              the call hangs for ``after`` seconds, then times out
``llm.rate_limited``         429 ``rate_limit_error`` with ``retry-after: <retry_after>``
``llm.overloaded``           529 ``overloaded_error``
``llm.server_error``         500 ``api_error``
``llm.malformed_tool_call``  a tool call's arguments are not valid JSON
``llm.unknown_tool``         a tool call names a tool that was not offered
``llm.stream_cut``           a stream ends in the middle of the message (streams only)
``llm.max_tokens``           the answer stops with ``max_tokens`` in the middle of a tool call
``llm.stream_stall``         a stream stops mid-message for ``after`` seconds, then goes on
``llm.answer_cut``           a whole (non-streamed) answer comes back cut short, no stop reason
============================ ================================================================

The direct client decides faults for the calling node; the API host for itself (its node
name), so ``nodes=("api.anthropic.com",)`` targets the host.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import attrs

from kelpie_agent.llm import (
    LlmBadRequestError,
    LlmError,
    LlmOverloadedError,
    LlmRateLimitedError,
    LlmServerError,
    LlmTimeoutError,
)

from ..._faults import FaultInjector, FaultSpec, register_fault
from ..._storms import StormSpec, register_storm
from ._turns import Call, Reply

__all__ = ["ALL", "Failure", "decide_failure", "malform", "unknown_tool"]

_R = register_fault
TIMEOUT = _R(
    FaultSpec(
        "llm.timeout",
        "the model call hangs, then times out",
        params={"after": 60.0},
        swarm_range=(0.0, 0.02),
        observed="SimLlmClient raises LlmTimeoutError after `after` virtual seconds; the API host "
        "answers 504 timeout_error after `after` seconds (or the SDK's own timeout fires "
        "first); AnthropicLlm raises LlmTimeoutError once the SDK's retries are spent",
    )
)
RATE_LIMITED = _R(
    FaultSpec(
        "llm.rate_limited",
        "the call is rate limited (429 with retry-after)",
        params={"retry_after": 2.0},
        swarm_range=(0.0, 0.1),
        observed="LlmRateLimitedError(retry_after=...); the SDK first retries after "
        "`retry_after` virtual seconds",
    )
)
OVERLOADED = _R(
    FaultSpec(
        "llm.overloaded",
        "the provider is overloaded (529)",
        swarm_range=(0.0, 0.1),
        observed="LlmOverloadedError (the SDK retries it with backoff first)",
    )
)
SERVER_ERROR = _R(
    FaultSpec(
        "llm.server_error",
        "the provider fails (500 api_error)",
        swarm_range=(0.0, 0.05),
        observed="LlmServerError (the SDK retries it with backoff first)",
    )
)
MALFORMED = _R(
    FaultSpec(
        "llm.malformed_tool_call",
        "a tool call's arguments are not valid JSON",
        swarm_range=(0.0, 0.05),
        observed="a ToolCall whose `input` is None; `arguments` holds the broken text",
    )
)
UNKNOWN_TOOL = _R(
    FaultSpec(
        "llm.unknown_tool",
        "the model calls a tool that was not offered",
        swarm_range=(0.0, 0.05),
        observed="a ToolCall whose name is not among the request's tools",
    )
)
STREAM_CUT = _R(
    FaultSpec(
        "llm.stream_cut",
        "a stream ends in the middle of the message",
        params={"clean": 0.0, "after_end": 0.0},
        swarm_range=(0.0, 0.05),
        observed="some chunks arrive, then LlmStreamCutError; never a StreamEnd. On the API "
        "host the connection breaks mid-body, except with probability `clean`: then the body "
        "ends properly without message_stop, half the time after an SSE `error` event "
        "(overloaded_error), as the real API does mid-stream. With probability `after_end` "
        "the API host sends the whole answer, message_stop included, and then breaks the "
        "connection before the body's end: the answer is whole and must be taken (the "
        "in-process port has no connection, so there it is a whole answer)",
    )
)
MAX_TOKENS = _R(
    FaultSpec(
        "llm.max_tokens",
        "the answer hits max_tokens in the middle of a tool call",
        swarm_range=(0.0, 0.05),
        observed="stop_reason 'max_tokens'; the last block is a ToolCall with truncated "
        "arguments (input None), or cut-off text when there is no tool call",
    )
)
STREAM_STALL = _R(
    FaultSpec(
        "llm.stream_stall",
        "a stream stops in the middle of the message for a while, then goes on",
        params={"after": 45.0},
        swarm_range=(0.0, 0.0),  # never drawn by swarm mode: scenarios ask for it by name
        observed="some chunks arrive, then nothing for `after` virtual seconds, then the rest "
        "of the answer and its StreamEnd (on the API host: the same SSE events, the pause "
        "between two of them); a caller whose timeout is shorter gives up on an answer the "
        "model was still writing",
    )
)
ANSWER_CUT = _R(
    FaultSpec(
        "llm.answer_cut",
        "a non-streamed answer comes back cut short, with no stop reason",
        swarm_range=(0.0, 0.0),  # never drawn by swarm mode: scenarios ask for it by name
        observed="as a gateway that buffers the model's stream answers when that stream broke: "
        "HTTP 200 and a message holding the blocks up to the first tool call, whose input is "
        "what a partial-JSON parser makes of the arguments so far (its first string value cut "
        "in half, later keys dropped), or the text cut midway when there is no tool call; and "
        "stop_reason null (the real API never sends null in a whole answer). "
        "AnthropicLlm raises LlmServerError (retryable); the in-process port raises the same. "
        "Non-streamed calls only (session 26)",
    )
)
STORM = register_storm(
    StormSpec(
        "llm",
        "the model API rate-limits, overloads, errors, times out and cuts streams",
        (
            ("llm.rate_limited", 0.5, (("retry_after", 4.0),)),
            ("llm.overloaded", 0.4, ()),
            ("llm.server_error", 0.3, ()),
            ("llm.stream_cut", 0.5, ()),
            ("llm.timeout", 0.2, (("after", 10.0),)),
            ("llm.max_tokens", 0.2, ()),
            ("llm.malformed_tool_call", 0.3, ()),
            ("llm.unknown_tool", 0.3, ()),
        ),
        length=(2.0, 6.0),
    )
)
ALL: tuple[FaultSpec, ...] = (
    TIMEOUT,
    RATE_LIMITED,
    OVERLOADED,
    SERVER_ERROR,
    MALFORMED,
    UNKNOWN_TOOL,
    STREAM_CUT,
    MAX_TOKENS,
    STREAM_STALL,
    ANSWER_CUT,
)


@attrs.frozen
class Failure:
    """A call that fails: the error the port raises and the HTTP answer the host gives."""

    kind: str  # bad_request | timeout | rate_limited | overloaded | server_error
    message: str
    status: int
    error_type: str  # Anthropic's error.type
    retry_after: float | None = None
    delay: float = 0.0  # virtual seconds before the failure shows

    def exception(self) -> LlmError:
        if self.kind == "rate_limited":
            return LlmRateLimitedError(self.message, retry_after=self.retry_after)
        cls: type[LlmError] = {
            "bad_request": LlmBadRequestError,
            "timeout": LlmTimeoutError,
            "overloaded": LlmOverloadedError,
            "server_error": LlmServerError,
        }[self.kind]
        return cls(self.message, status=self.status)


def decide_failure(faults: FaultInjector, node: str | None, model: str) -> Failure | None:
    """One draw per failure fault, in a fixed order; the first that fires wins."""
    fault = faults.fires(TIMEOUT.name, node=node, model=model)
    if fault is not None:
        after = fault.param("after")
        return Failure(
            "timeout", f"injected llm.timeout after {after:g}s", 504, "timeout_error", None, after
        )
    fault = faults.fires(RATE_LIMITED.name, node=node, model=model)
    if fault is not None:
        wait = fault.param("retry_after")
        return Failure("rate_limited", "injected llm.rate_limited", 429, "rate_limit_error", wait)
    if faults.fires(OVERLOADED.name, node=node, model=model):
        return Failure("overloaded", "injected llm.overloaded: Overloaded", 529, "overloaded_error")
    if faults.fires(SERVER_ERROR.name, node=node, model=model):
        return Failure(
            "server_error", "injected llm.server_error: Internal server error", 500, "api_error"
        )
    return None


_GHOSTS = ("search_web", "run_shell", "send_email", "get_time", "delete_everything", "open_file")


def unknown_tool(reply: Reply, offered: set[str], rng: random.Random) -> Reply:
    """The reply with its first tool call renamed to a tool that was not offered (or with
    such a call added)."""
    name = rng.choice(_GHOSTS)
    while name in offered:
        name += "_x"
    items = list(reply)
    for i, item in enumerate(items):
        if isinstance(item, Call):
            items[i] = attrs.evolve(item, name=name)
            return tuple(items)
    return (*items, Call(name, {"query": "anything"}))


def malform(arguments: str, rng: random.Random) -> str:
    """``arguments`` (JSON text) damaged so that it no longer parses."""
    damages: list[Callable[[str], str]] = [
        lambda s: s[:-1],  # the closing brace is missing
        lambda s: s.replace(":", "=", 1),
        lambda s: s[:-1] + ",}" if len(s) > 2 else "{,}",
        lambda s: s.replace('"', "'"),
        lambda s: s + "}",
    ]
    rng.shuffle(damages)
    for damage in damages:
        broken = damage(arguments)
        try:
            json.loads(broken)
        except ValueError:
            return broken
    return arguments[: len(arguments) // 2] or "{"
