"""The SimLLM engine shared by the direct client and the API host.

For each request it checks the API's rules, decides the failure faults, asks the policy for
a reply, applies the reply-shaping faults, fits the reply into ``max_tokens``, and lays the
answer out as a timeline of stream chunks: the first after the time to first token, then
one per token at ``tokens_per_second``, all in virtual time. Both ways of plugging the
SimLLM in consume the same :class:`Plan`, so for one seed they say the same thing.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Callable
from typing import Protocol

import attrs

from kelpie_agent.llm import (
    AssistantBlock,
    LlmRequest,
    LlmResponse,
    StreamChunk,
    StreamEnd,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
)

from ..._rng import RngStream
from ..._sim import Simulation
from ._faults import (
    ANSWER_CUT,
    MALFORMED,
    MAX_TOKENS,
    STREAM_CUT,
    STREAM_STALL,
    UNKNOWN_TOOL,
    Failure,
    decide_failure,
    malform,
    unknown_tool,
)
from ._summarizer import is_summary_request, summarize
from ._turns import Call, Policy, Reply

__all__ = [
    "LlmObserver",
    "LlmTiming",
    "Plan",
    "SimLlmEngine",
    "StreamShape",
    "check_api_rules",
    "count_tokens",
]

_PIECE = re.compile(r"\s*\S+|\s+")
_ALPHABET = string.ascii_letters + string.digits
ARGS_CHUNK = 16  # characters of tool-call JSON per delta


def _pieces(text: str) -> list[str]:
    return _PIECE.findall(text)


def _arg_tokens(arguments: str) -> int:
    return max(1, math.ceil(len(arguments) / 4))


def count_tokens(request: LlmRequest) -> int:
    """A deterministic estimate of the request's input tokens (about four characters each)."""
    chars = len(request.system)
    for message in request.messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ToolCall):
                chars += len(block.name) + len(block.arguments)
            else:
                chars += len(block.content)
        chars += 8
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(repr(tool.input_schema))
    return max(1, math.ceil(chars / 4))


def _positive(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"LlmTiming.{attribute.name} must be > 0, got {value!r}")


@attrs.frozen
class LlmTiming:
    """Virtual latency: time to first token drawn from ``[ttft_min, ttft_max]``, then
    ``tokens_per_second`` (``math.inf`` for no delay at all)."""

    ttft_min: float = 0.2
    ttft_max: float = 0.6
    tokens_per_second: float = attrs.field(default=80.0, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.ttft_min <= self.ttft_max:
            raise ValueError(f"LlmTiming needs 0 <= ttft_min <= ttft_max, got {self}")

    @classmethod
    def instant(cls) -> LlmTiming:
        return cls(0.0, 0.0, math.inf)


@attrs.frozen
class StreamShape:
    """How the answer's stream is cut (all off by default: text by words, tool-call JSON
    in :data:`ARGS_CHUNK`-character deltas, as the model wrote it).

    ``escapes``: tool-call arguments are sent ASCII-escaped (``json.dumps`` with
    ``ensure_ascii``), so non-ASCII text arrives as ``\\uXXXX`` escapes and characters
    outside the BMP as surrogate pairs, as models may write them; the value is the same.
    ``cut_anywhere``: every text and tool-call delta is 1 to ``max_cut`` characters long,
    drawn from the ``llm/chunks`` stream, so a boundary falls at every position, inside a
    word, right after an escape's backslash or inside ``\\uXXXX``."""

    escapes: bool = False
    cut_anywhere: bool = False
    max_cut: int = 6
    blank_text: bool = False  # keep a policy's whitespace-only text blocks (real models open
    # a tool-use answer with "\n\n" now and then); off: they are dropped


@attrs.frozen
class Plan:
    """One answer, laid out in time: ``steps`` are (delay before, chunk) pairs ending with
    the :class:`StreamEnd`. ``cut_after``: a stream delivers that many steps, then breaks;
    ``cut_clean``: the probability that the API host ends such a body properly (no
    message_stop) rather than breaking the connection. ``reset_after_end``: the API host breaks
    the connection after the last event, before the body's end (the answer is whole).
    ``stall_at``: the stream stops for ``stall`` seconds before that step (``llm.stream_stall``),
    then goes on. ``partial``: a non-streamed answer comes back cut short (``llm.answer_cut``):
    these blocks, no stop reason; ``cut_after`` is then 0."""

    response: LlmResponse
    steps: tuple[tuple[float, StreamChunk], ...]
    cut_after: int | None = None
    cut_clean: float = 0.0
    reset_after_end: bool = False
    stall_at: int | None = None  # before this step the stream stops for ``stall`` seconds
    stall: float = 0.0
    partial: tuple[AssistantBlock, ...] | None = None

    @property
    def duration(self) -> float:
        return sum(delay for delay, _ in self.steps)


def check_api_rules(request: LlmRequest) -> str | None:
    """What the Messages API would reject in this request (as its 400 message), or ``None``."""
    messages = request.messages
    uses_tools = False
    for i, message in enumerate(messages):
        for j, block in enumerate(message.content):
            if isinstance(block, TextBlock) and not block.text.strip():
                return (
                    f"messages.{i}.content.{j}: text content blocks must contain "
                    "non-whitespace text"
                )
            uses_tools = uses_tools or isinstance(block, ToolCall | ToolResult)
        if message.role == "assistant":
            calls = [b.id for b in message.content if isinstance(b, ToolCall)]
            if calls and i + 1 < len(messages):
                after = messages[i + 1]
                answered = {b.tool_call_id for b in after.content if isinstance(b, ToolResult)}
                missing = [c for c in calls if c not in answered]
                if missing:
                    return (
                        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {', '.join(missing)}"
                    )
            continue
        kinds = [isinstance(b, ToolResult) for b in message.content]
        if any(kinds):
            before = messages[i - 1] if i > 0 else None
            ids = {b.id for b in before.content if isinstance(b, ToolCall)} if before else set()
            for j, block in enumerate(message.content):
                if isinstance(block, ToolResult) and block.tool_call_id not in ids:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.tool_call_id}"
                    )
            if kinds != sorted(kinds, reverse=True):
                return f"messages.{i}: `tool_result` blocks must come before any other content"
    if uses_tools and not request.tools:
        return "requests which include `tool_use` or `tool_result` blocks must define tools"
    return None


class LlmObserver(Protocol):
    """Sees every request the model gets and what the engine decided (a plan, or a failure):
    the place where an oracle checks what the LLM was shown (kelpie_dst.workloads)."""

    def observe(self, request: LlmRequest, outcome: Plan | Failure, node: str | None) -> None: ...


class SimLlmEngine:
    """Turns requests into plans (or failures) for one policy. Outside a simulation it draws
    from its own streams seeded by ``seed`` and injects no faults."""

    def __init__(
        self,
        policy: Policy,
        timing: LlmTiming | None = None,
        seed: int = 0,
        observer: LlmObserver | None = None,
        shape: StreamShape | None = None,
    ) -> None:
        self.policy = policy
        self.timing = timing or LlmTiming()
        self.shape = shape or StreamShape()
        self.seed = seed
        self.observer = observer
        self._own: dict[str, RngStream] = {}

    def rng(self, sim: Simulation | None, name: str) -> RngStream:
        if sim is not None:
            return sim.rng(name)
        stream = self._own.get(name)
        if stream is None:
            stream = self._own[name] = RngStream(self.seed, name)
        return stream

    def new_id(self, sim: Simulation | None, prefix: str, length: int = 24) -> str:
        rng = self.rng(sim, "llm/ids")
        return prefix + "".join(rng.choice(_ALPHABET) for _ in range(length))

    def plan(
        self, request: LlmRequest, *, streaming: bool, sim: Simulation | None, node: str | None
    ) -> Plan | Failure:
        outcome = self._plan(request, streaming=streaming, sim=sim, node=node)
        if self.observer is not None:
            self.observer.observe(request, outcome, node)
        return outcome

    def _plan(
        self, request: LlmRequest, *, streaming: bool, sim: Simulation | None, node: str | None
    ) -> Plan | Failure:
        if sim is not None:
            sim.trace_event(
                "llm.request",
                model=request.model,
                messages=len(request.messages),
                tools=len(request.tools),
                stream=streaming,
            )
        problem = check_api_rules(request)
        failure = Failure("bad_request", problem, 400, "invalid_request_error") if problem else None
        if failure is None and sim is not None:
            failure = decide_failure(sim.faults, node, request.model)
        if failure is not None:
            if sim is not None:
                sim.trace_event("llm.failure", failure=failure.kind, status=failure.status)
            return failure
        if is_summary_request(request):
            reply: tuple[str | Call, ...] = (summarize(request),)
        else:
            reply = self.policy.respond(request, self.rng(sim, "llm/policy"))
        if not isinstance(reply, tuple) or not all(isinstance(r, str | Call) for r in reply):
            raise TypeError(f"{type(self.policy).__name__}.respond must return a tuple of str/Call")
        shaping = self.rng(sim, "llm/faults")
        faults = sim.faults if sim is not None else None
        if faults and faults.fires(UNKNOWN_TOOL.name, node=node, model=request.model):
            reply = unknown_tool(reply, {t.name for t in request.tools}, shaping)
        blocks = self._blocks(sim, reply)
        calls = [i for i, b in enumerate(blocks) if isinstance(b, ToolCall)]
        if calls and faults and faults.fires(MALFORMED.name, node=node, model=request.model):
            i = shaping.choice(calls)
            call = blocks[i]
            assert isinstance(call, ToolCall)
            blocks[i] = attrs.evolve(call, arguments=malform(call.arguments, shaping))
        forced = bool(faults and faults.fires(MAX_TOKENS.name, node=node, model=request.model))
        if forced:
            blocks = _cut_midway(blocks)
        blocks, truncated = _fit(blocks, request.max_tokens)
        stop = "max_tokens" if truncated or forced else ("tool_use" if calls else "end_turn")
        output = sum(_cost(b) for b in blocks)
        usage = Usage(count_tokens(request), output)
        response = LlmResponse(self.new_id(sim, "msg_01"), request.model, blocks, stop, usage)
        steps = self._steps(sim, response)
        cut, clean = None, 0.0
        fired = None
        partial = None
        if streaming and faults:
            fired = faults.fires(STREAM_CUT.name, node=node, model=request.model)
        elif faults and faults.fires(ANSWER_CUT.name, node=node, model=request.model):
            cut, partial = 0, tuple(_gateway_cut(blocks))
        reset = False
        if fired is not None:
            after_end = fired.param("after_end")
            if after_end and sim is not None and sim.rng("llm/after_end").random() < after_end:
                reset = True  # the whole answer, then the connection breaks
            else:
                cut, clean = shaping.randint(0, len(steps) - 1), fired.param("clean")
        stall_at, stall = None, 0.0
        stalled = (
            faults.fires(STREAM_STALL.name, node=node, model=request.model)
            if (streaming and faults and cut is None and len(steps) > 1)
            else None
        )
        if stalled is not None:
            stall_at, stall = shaping.randint(1, len(steps) - 1), stalled.param("after")
        if sim is not None:
            extra: dict[str, object] = {"reset_after_end": True} if reset else {}
            if stall_at is not None:
                extra["stall_at"] = stall_at
            sim.trace_event(
                "llm.response",
                id=response.id,
                stop_reason=stop,
                blocks=len(blocks),
                output_tokens=output,
                cut_after=cut,
                **extra,
            )
        return Plan(response, steps, cut, clean, reset, stall_at, stall, partial)

    def _blocks(self, sim: Simulation | None, reply: Reply) -> list[AssistantBlock]:
        blocks: list[AssistantBlock] = []
        for item in reply:
            if isinstance(item, str):
                if item.strip() or (item and self.shape.blank_text):
                    blocks.append(TextBlock(item))
            else:
                call_id = item.id or self.new_id(sim, "toolu_01")
                if item.raw is not None:
                    blocks.append(ToolCall(call_id, item.name, item.raw))
                elif self.shape.escapes:
                    args = json.dumps(dict(item.input), separators=(",", ":"), ensure_ascii=True)
                    blocks.append(ToolCall(call_id, item.name, args))
                else:
                    blocks.append(ToolCall.of(call_id, item.name, item.input))
        return blocks

    def _steps(
        self, sim: Simulation | None, response: LlmResponse
    ) -> tuple[tuple[float, StreamChunk], ...]:
        timing = self.timing
        per_token = 0.0 if math.isinf(timing.tokens_per_second) else 1.0 / timing.tokens_per_second
        ttft = timing.ttft_min
        if timing.ttft_max > timing.ttft_min:
            ttft += (timing.ttft_max - timing.ttft_min) * self.rng(sim, "llm/latency").random()
        steps: list[tuple[float, StreamChunk]] = []
        cut = self._cutter(sim)
        for index, block in enumerate(response.content):
            if isinstance(block, TextBlock):
                pieces = cut(block.text) if cut else _pieces(block.text)
                steps.extend((per_token, TextDelta(index, p)) for p in pieces)
                continue
            steps.append((0.0, ToolCallStart(index, block.id, block.name)))
            args = block.arguments
            chunks = cut(args) if cut else _fixed(args)
            steps.extend((_arg_tokens(p) * per_token, ToolCallDelta(index, p)) for p in chunks)
        end = StreamEnd(response.id, response.model, response.stop_reason, response.usage)
        steps.append((0.0, end))
        steps[0] = (steps[0][0] + ttft, steps[0][1])
        return tuple(steps)

    def _cutter(self, sim: Simulation | None) -> Callable[[str], list[str]] | None:
        """With ``cut_anywhere``: a function cutting a text into 1 to ``max_cut``-character
        pieces at random positions (the ``llm/chunks`` stream, drawn only then)."""
        if not self.shape.cut_anywhere:
            return None
        rng, most = self.rng(sim, "llm/chunks"), max(1, self.shape.max_cut)

        def cut(text: str) -> list[str]:
            pieces, at = [], 0
            while at < len(text):
                size = rng.randint(1, most)
                pieces.append(text[at : at + size])
                at += size
            return pieces

        return cut


def _fixed(args: str) -> list[str]:
    return [args[at : at + ARGS_CHUNK] for at in range(0, len(args), ARGS_CHUNK)]


def _cost(block: AssistantBlock) -> int:
    return (
        len(_pieces(block.text)) if isinstance(block, TextBlock) else _arg_tokens(block.arguments)
    )


def _cut_midway(blocks: list[AssistantBlock]) -> list[AssistantBlock]:
    """The blocks cut off in the middle of the first tool call's arguments (or, without a
    tool call, in the middle of the last text)."""
    for i, block in enumerate(blocks):
        if isinstance(block, ToolCall):
            keep = max(1, len(block.arguments) // 2)
            return [*blocks[:i], attrs.evolve(block, arguments=block.arguments[:keep])]
    if not blocks:
        return blocks
    last = blocks[-1]
    assert isinstance(last, TextBlock)
    pieces = _pieces(last.text)
    return [*blocks[:-1], TextBlock("".join(pieces[: max(1, len(pieces) // 2)]))]


def _gateway_cut(blocks: list[AssistantBlock]) -> list[AssistantBlock]:
    """What a gateway that buffered a broken stream returns as a whole answer: the blocks up
    to the first tool call, whose input is what a partial-JSON parser makes of the arguments
    streamed so far (the keys before the cut, the first string value cut in half, the rest
    dropped); without a tool call, the last text cut in the middle."""
    for i, block in enumerate(blocks):
        if isinstance(block, ToolCall):
            return [*blocks[:i], ToolCall.of(block.id, block.name, _partial_input(block))]
    return _cut_midway(blocks)


def _partial_input(call: ToolCall) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in (call.input or {}).items():
        if isinstance(value, str) and len(value) > 1:
            out[key] = value[: len(value) // 2]
            break
        out[key] = value
    return out


def _fit(blocks: list[AssistantBlock], budget: int) -> tuple[list[AssistantBlock], bool]:
    """The blocks cut to ``budget`` output tokens, and whether anything was cut."""
    out: list[AssistantBlock] = []
    left = budget
    for block in blocks:
        cost = _cost(block)
        if cost <= left:
            out.append(block)
            left -= cost
            continue
        if isinstance(block, TextBlock):
            if left > 0:
                out.append(TextBlock("".join(_pieces(block.text)[:left])))
        elif left > 0:
            keep = min(len(block.arguments) - 1, left * 4)
            out.append(attrs.evolve(block, arguments=block.arguments[:keep]))
        return out, True
    return out, False
