"""The LLM port's contract, checked where the agent meets the model (``transport =
"anthropic_api"``): what the production adapter hands the agent must be what the model said.

Two observers, kept apart from the simulator and from kelpie_agent:

* :class:`ModelAnswers` tees the API host's observer and keeps every answer the model planned,
  by message id, with whether its stream was to be cut, and counts the requests the model
  refused as invalid (4xx other than 429: the only failures a client may not retry).
* :class:`RecordingLlm` wraps a server node's LLM port (instrumentation, not a mock: every call
  goes through unchanged) and notes what each call gave the agent: an answer, or an error and
  whether the port called it retryable.

:func:`check_port` then states the properties a user of any LLM adapter relies on:

* **an answer is the model's answer**: the same blocks in order (text exactly, tool calls with
  the same ids, names and arguments), stop reason and usage as the model sent;
* **a cut stream is never an answer**: a stream the model broke off raises, it never ends as
  a finished response, and a stream that finished ended with exactly one ``StreamEnd``;
* **the agent gives up only when the model refused**: no more non-retryable errors reach the
  agent than the model refused requests (overloads, rate limits, 5xx, timeouts and cut
  connections must stay retryable);
* **a rate limit says how long the API asked to wait**: a 429 that reaches the agent carries a
  ``retry_after`` the API sent (``retry-after`` is in seconds, ``retry-after-ms`` in
  milliseconds), since the agent sleeps at least that long before it asks again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import attrs

from kelpie_agent.llm import (
    ChunkStream,
    LlmClient,
    LlmError,
    LlmRateLimitedError,
    LlmRequest,
    LlmResponse,
    StreamChunk,
    StreamEnd,
    TextBlock,
    ToolCall,
    ToolResult,
)

from ..shims.llm import Failure, LlmObserver, Plan

__all__ = ["ModelAnswers", "PortCall", "RecordingLlm", "check_port", "check_requests"]


@attrs.frozen
class PortCall:
    """What one call of the port gave the agent."""

    node: str
    streamed: bool
    response: LlmResponse | None = None
    error: str | None = None  # the LlmError's class name
    retryable: bool = True
    ends: int = 0  # StreamEnd chunks seen (streams)
    retry_after: float | None = None  # a rate limit's wait, as the port reported it
    request: LlmRequest | None = attrs.field(default=None, eq=False)  # what the agent asked


class ModelAnswers:
    """The model's side: every planned answer by id, and the refusals (tees ``inner``)."""

    def __init__(self, inner: LlmObserver) -> None:
        self.inner = inner
        self.answers: dict[str, LlmResponse] = {}
        self.cut: set[str] = set()
        self.refused = 0
        self.waits: set[float] = set()  # the retry-after of every 429 the model sent
        self.bare_limits = 0  # 429s sent without a retry-after
        # session 17 (llmL): each planned answer's id -> the request as the host parsed it
        self.requests: dict[str, LlmRequest] = {}

    def observe(self, request: LlmRequest, outcome: Plan | Failure, node: str | None) -> None:
        if isinstance(outcome, Plan):
            self.answers[outcome.response.id] = outcome.response
            self.requests[outcome.response.id] = request
            if outcome.cut_after is not None:
                self.cut.add(outcome.response.id)
        elif outcome.status == 429:
            if outcome.retry_after is None:
                self.bare_limits += 1
            else:
                self.waits.add(outcome.retry_after)
        elif 400 <= outcome.status < 500:
            self.refused += 1
        self.inner.observe(request, outcome, node)


class RecordingLlm:
    """A node's LLM port, noting what each call gave the agent in ``calls``."""

    def __init__(self, inner: LlmClient, node: str, calls: list[PortCall]) -> None:
        self.inner, self.node, self.calls = inner, node, calls

    def _error(self, error: LlmError, streamed: bool, ends: int = 0) -> None:
        name = type(error).__name__
        wait = error.retry_after if isinstance(error, LlmRateLimitedError) else None
        self.calls.append(PortCall(self.node, streamed, None, name, error.retryable, ends, wait))

    async def complete(self, request: LlmRequest) -> LlmResponse:
        try:
            response = await self.inner.complete(request)
        except LlmError as error:
            self._error(error, False)
            raise
        self.calls.append(PortCall(self.node, False, response, request=request))
        return response

    def stream(self, request: LlmRequest) -> ChunkStream:
        return ChunkStream(self._chunks(request))

    async def _chunks(self, request: LlmRequest) -> AsyncGenerator[StreamChunk, None]:
        ends = 0
        async with self.inner.stream(request) as stream:
            try:
                async for chunk in stream:
                    ends += isinstance(chunk, StreamEnd)
                    yield chunk
            except LlmError as error:
                self._error(error, True, ends)
                raise
            try:
                response: LlmResponse | None = stream.response
            except ValueError:
                response = None  # finished without a StreamEnd: check_port says so
            self.calls.append(
                PortCall(self.node, True, response, None, True, ends, request=request)
            )


def _arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments


def _same(got: LlmResponse, sent: LlmResponse) -> str | None:
    """How the answer the agent got differs from the model's (``None``: it does not)."""
    if got.stop_reason != sent.stop_reason:
        return f"stop reason {got.stop_reason!r}, the model said {sent.stop_reason!r}"
    if got.usage != sent.usage:
        return f"usage {got.usage}, the model said {sent.usage}"
    mine = [b for b in got.content if not (isinstance(b, TextBlock) and not b.text)]
    theirs = [b for b in sent.content if not (isinstance(b, TextBlock) and not b.text)]
    if len(mine) != len(theirs):
        return f"{len(mine)} content blocks, the model sent {len(theirs)}"
    for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        if type(a) is not type(b):
            return f"block {i} is a {type(a).__name__}, the model sent a {type(b).__name__}"
        if isinstance(a, TextBlock) and isinstance(b, TextBlock) and a.text != b.text:
            return f"block {i}'s text differs from the model's"
        if isinstance(a, ToolCall) and isinstance(b, ToolCall):
            if (a.id, a.name) != (b.id, b.name):
                return f"block {i} calls {a.name} ({a.id}), the model called {b.name} ({b.id})"
            if _arguments(a) != _arguments(b):
                return f"block {i}'s arguments {a.arguments!r}, the model sent {b.arguments!r}"
    return None


def _wrong_wait(wait: float | None, model: ModelAnswers) -> str | None:
    """Why a 429's ``retry_after`` at the port is not one the model asked for (or None)."""
    if wait is None:
        if model.waits and not model.bare_limits:
            return "lost the retry-after the API sent"
        return None
    if any(abs(wait - sent) <= 1e-6 * max(1.0, sent) for sent in model.waits):
        return None
    asked = ", ".join(f"{w:g}" for w in sorted(model.waits)) or "none"
    return f"asks the agent to wait {wait:g} s; the API asked for {asked} s"


def _canonical(request: LlmRequest) -> Any:
    """A request as the Messages API carries it, for comparing the agent's with the model's: a
    tool call's arguments as the JSON object sent (``{}`` for arguments that are not one: the
    API wants an object), schemas as JSON."""

    def block(b: object) -> Any:
        if isinstance(b, TextBlock):
            return ("text", b.text)
        if isinstance(b, ToolCall):
            args = _arguments(b)
            return ("tool_use", b.id, b.name, args if isinstance(args, dict) else {})
        assert isinstance(b, ToolResult)
        return ("tool_result", b.tool_call_id, b.content, b.is_error)

    return (
        request.model,
        request.max_tokens,
        request.system,
        tuple(
            (t.name, t.description, json.dumps(dict(t.input_schema), sort_keys=True))
            for t in request.tools
        ),
        tuple((m.role, tuple(block(b) for b in m.content)) for m in request.messages),
    )


def check_requests(calls: list[PortCall], model: ModelAnswers) -> list[str]:
    """**The model is asked what the agent asked** (session 17, llmL): for every answer the
    agent got through the port, the request the API host parsed off the wire for that answer
    is the request the agent gave the port (model, max_tokens, system prompt, tools with their
    descriptions and schemas, every turn's blocks; a tool result's ``is_error``), compared as
    the API carries it. Catches an adapter that drops or changes a field on the way out."""
    problems: list[str] = []
    for call in calls:
        if call.response is None or call.request is None:
            continue
        seen = model.requests.get(call.response.id)
        if seen is None:
            continue  # not the model's answer: check_port names it
        mine, theirs = _canonical(call.request), _canonical(seen)
        if mine != theirs:
            names = ("model", "max_tokens", "system", "tools", "messages")
            differ = [n for n, a, b in zip(names, mine, theirs, strict=True) if a != b]
            problems.append(
                f"{call.node}: answer {call.response.id} answers a request whose "
                f"{', '.join(differ)} differ from what the agent asked"
            )
    return problems[:20]


def check_port(calls: list[PortCall], model: ModelAnswers) -> list[str]:
    """The port's contract over a run (see the module's docstring)."""
    problems: list[str] = []
    for call in calls:
        kind = "stream" if call.streamed else "call"
        if call.error is not None:
            if call.ends:
                problems.append(f"{call.node}: a {kind} failed ({call.error}) after its end")
            if call.error == LlmRateLimitedError.__name__:
                wrong = _wrong_wait(call.retry_after, model)
                if wrong:
                    problems.append(f"{call.node}: a rate-limited {kind} {wrong}")
            continue
        if call.streamed and call.ends != 1:
            problems.append(
                f"{call.node}: a stream finished with {call.ends} end chunks (exactly 1 expected)"
            )
        if call.response is None:
            continue
        rid = call.response.id
        sent = model.answers.get(rid)
        if sent is None:
            problems.append(f"{call.node}: answer {rid} is not one the model sent")
        elif rid in model.cut:
            problems.append(f"{call.node}: the model cut answer {rid} off, yet the agent got it")
        else:
            differs = _same(call.response, sent)
            if differs:
                problems.append(f"{call.node}: answer {rid}: {differs}")
    final = [c for c in calls if c.error is not None and not c.retryable]
    if len(final) > model.refused:
        names = sorted({c.error or "" for c in final})
        problems.append(
            f"{len(final)} LLM error(s) reached the agent as not retryable ({', '.join(names)}), "
            f"but the model refused only {model.refused} request(s)"
        )
    return problems
