"""Context management: what of the history the model sees, and compaction when it would overflow.

Every message stays stored (and searchable with ``conversation_search``); what changes is what
is *in context*. The agent's :class:`ContextWindow` (``context/<agent_id>``) says where the
context starts and carries the summary message of everything before it. A prompt's history is
that summary (a hidden ``system_alert`` user turn, Letta's wording) followed by the messages
from ``start_seq`` on.

Before each step the loop measures the context (:func:`needs_compaction`): more characters than
the prompt's budget, or more messages than three quarters of ``history_window`` (the messages
the runtime keeps in memory). Then the older messages are summarized through the LLM (a request
without tools whose system prompt starts with :data:`~kelpie_agent.llm.SUMMARIZER_SYSTEM`) and
**one transaction** stores the summary message, the new window and, inside a run, the run's
checkpoint: a crash before the commit changes nothing (the summary is asked for again), a crash
after it finds the context compacted and does not summarize again. No message is deleted.

Modes (Letta's ``compaction_settings.mode``): ``sliding_window`` keeps the newest messages that
fit ``sliding_window_percentage`` of the budget (and of ``history_window``), cut where a turn
starts (a user's input), so a run's input, calls and results stay together and a run in
progress keeps its own input in view; ``all`` keeps only the latest turn inside a run, nothing
on demand.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from kelpie_agent.llm import SUMMARIZER_SYSTEM, LlmRequest, Message, TextBlock

from ._boot import is_prompt
from ._checkpoint import SessionCheckpoint
from ._codec import Keys, pack, unpack
from ._errors import InvalidRequestError, SummarizerError
from ._llm_call import LlmFailure, call_llm
from ._messages import (
    AgentMessage,
    ReasoningMessage,
    SystemMessage,
    ToolCallMessage,
    ToolReturnMessage,
    UserMessage,
    message_text,
)
from ._requests import CompactMessages
from ._runtime import AgentRuntime
from ._window import ContextWindow

__all__ = [
    "COMPACTION_MODES",
    "CompactionResult",
    "CompactionSettings",
    "compact",
    "compact_before_step",
    "compact_now",
    "context_body",
    "in_context",
    "needs_compaction",
]

COMPACTION_MODES = ("sliding_window", "all")
_ACKNOWLEDGEMENT = "Reply with the summary only: no preamble, and no reply to the messages."
TRUNCATED = "... [truncated]"
_PER_MESSAGE = 2000  # characters of one message shown to the summarizer
_SLIDING_PROMPT = (
    "The messages below are being evicted from the beginning of the agent's context window. "
    "Write a summary of them that will stand before the remaining recent messages: the user's "
    "goals and requests, what was done and found, facts, names and identifiers worth keeping "
    "verbatim, and key words to search the full history with later. If the transcript starts "
    "with an earlier summary, fold it in. Under 300 words. Output only the summary."
)
_ALL_PROMPT = (
    "Summarize the whole conversation below for the agent that had it: the user's goals and "
    "requests, what happened, important details and identifiers (verbatim), the current state, "
    "and key words to search the full history with later. If the transcript starts with an "
    "earlier summary, fold it in. Under 500 words. Output only the summary."
)


def _fraction(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InvalidRequestError(
            f"compaction_settings.{attribute.name}: must be between 0 and 1, got {value!r}"
        )


def _mode(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in COMPACTION_MODES:
        raise InvalidRequestError(
            f"compaction_settings.mode: must be one of {', '.join(COMPACTION_MODES)}, got {value!r}"
        )


@attrs.frozen
class CompactionSettings:
    """How to compact (the parts of Letta's ``CompactionSettings`` Kelpie implements)."""

    mode: str = attrs.field(default="sliding_window", validator=_mode)
    prompt: str | None = None  # the summarizer's instructions; None: the mode's default
    clip_chars: int | None = 50_000  # the summary is cut to this many characters
    sliding_window_percentage: float = attrs.field(default=0.3, validator=_fraction)
    acknowledge: bool = False  # Letta's prompt_acknowledgement

    @property
    def instructions(self) -> str:
        text = self.prompt or (_ALL_PROMPT if self.mode == "all" else _SLIDING_PROMPT)
        return f"{text}\n\n{_ACKNOWLEDGEMENT}" if self.acknowledge else text


@attrs.frozen
class CompactionResult:
    """Letta's ``CompactionResponse``: the summary and the context's size around it."""

    summary: str
    num_messages_before: int
    num_messages_after: int


def _is_summary(message: AgentMessage) -> bool:
    return isinstance(message, UserMessage) and message.kind == "summary"


async def context_body(rt: AgentRuntime) -> list[AgentMessage]:
    """The messages in context (from ``start_seq`` on, summaries and the stored system prompt
    left out: every step compiles the prompt afresh): from the window
    kept in memory when it reaches back far enough, else read from storage."""
    start = rt.context.start_seq
    history = rt.history
    covered = bool(history) and (history[0].seq <= start or len(history) < (history.maxlen or 0))
    if covered or not history:
        messages: Sequence[AgentMessage] = history
    else:
        end = Keys.prefix_end(rt.tkeys.messages)
        rows = await rt.read(
            lambda: rt.ctx.kv.scan(rt.tkeys.message(max(start, 1)), end), "the context"
        )
        messages = [unpack(value) for _, value in rows]
    return [m for m in messages if m.seq >= start and not _is_summary(m) and not is_prompt(m)]


def in_context(rt: AgentRuntime, body: Sequence[AgentMessage]) -> list[AgentMessage]:
    """The prompt's history: the current summary (if any), then the messages in context."""
    summary = rt.context.summary
    return [summary, *body] if summary is not None else list(body)


def _size(messages: Sequence[AgentMessage]) -> int:
    from ._prompt import message_size

    return sum(message_size(m) for m in messages)


def _keep_count(rt: AgentRuntime, settings: CompactionSettings) -> int:
    return max(1, int(rt.config.history_window * settings.sliding_window_percentage))


def needs_compaction(rt: AgentRuntime, body: Sequence[AgentMessage], budget_chars: int) -> bool:
    """Whether the context would not fit: over the budget, or over 3/4 of ``history_window``
    messages."""
    limit = max(4, rt.config.history_window * 3 // 4)
    return len(body) > limit or _size(in_context(rt, body)) > budget_chars


def _starts_turn(message: AgentMessage) -> bool:
    """A turn starts at a user's input (or a system message sent as input): cutting there
    keeps each run whole, its input with its steps, calls and results."""
    if isinstance(message, UserMessage):
        return message.kind == "input"
    return isinstance(message, SystemMessage)


def _cut(
    body: Sequence[AgentMessage], keep: tuple[int, int], mode: str, keep_last_turn: bool
) -> int:
    """The index of the first message to keep (``len(body)``: keep none); 0: nothing to do."""
    starts = [i for i in range(1, len(body)) if _starts_turn(body[i])]
    if not keep_last_turn:
        starts.append(len(body))
    if not starts:
        return 0
    if mode == "all":
        return starts[-1]
    for cut in starts:
        if len(body) - cut <= keep[0] and _size(body[cut:]) <= keep[1]:
            return cut
    return starts[-1]


def _line(message: AgentMessage) -> str:
    if isinstance(message, UserMessage | SystemMessage):
        role = message.message_type.removesuffix("_message")
    elif isinstance(message, ToolCallMessage):
        role = "tool call"
    elif isinstance(message, ToolReturnMessage):
        role = f"tool result ({message.status})"
    elif isinstance(message, ReasoningMessage):
        role = "thinking"
    else:
        role = "assistant"
    text = message_text(message)
    if len(text) > _PER_MESSAGE:
        text = text[:_PER_MESSAGE] + TRUNCATED
    return f"[{role}] {text}"


def _request(
    rt: AgentRuntime, evicted: Sequence[AgentMessage], settings: CompactionSettings
) -> LlmRequest:
    agent = rt.require()
    parts = []
    if rt.context.text:
        parts.append(f"Earlier summary:\n{rt.context.text}\n")
    parts.append("Messages to summarize:")
    parts += [_line(m) for m in evicted]
    system = f"{SUMMARIZER_SYSTEM}\n\n{settings.instructions}"
    turn = Message("user", (TextBlock("\n".join(parts)),))
    return LlmRequest(agent.llm_model, (turn,), system, (), agent.max_tokens)


def _alert(summary: str, evicted: int, total: int, time: str) -> str:
    """Letta's packed summary message."""
    note = (
        f"Note: prior messages ({evicted} of {total} total messages) have been hidden from view "
        "due to conversation memory constraints.\nThe following is a summary of the previous "
        f"{evicted} messages:\n {summary}"
    )
    return json.dumps({"type": "system_alert", "message": note, "time": time}, ensure_ascii=False)


async def compact(
    rt: AgentRuntime,
    settings: CompactionSettings,
    *,
    budget_chars: int,
    cp: SessionCheckpoint | None = None,
    keep_last_turn: bool = False,
) -> CompactionResult | None:
    """Summarize the oldest messages in context; None when nothing can be evicted. Inside a
    run (``cp``) the latest turn always stays and the checkpoint commits with the summary.
    Raises the loop's ``LlmFailure`` when the summarizer keeps failing."""
    window = rt.context
    body = await context_body(rt)
    before = len(in_context(rt, body))
    keep = (_keep_count(rt, settings), int(budget_chars * settings.sliding_window_percentage))
    cut = _cut(body, keep, settings.mode, keep_last_turn=keep_last_turn or cp is not None)
    if cut == 0:
        return None
    evicted = body[:cut]
    outcome = await call_llm(
        rt.env.llm,
        _request(rt, evicted, settings),
        config=rt.config,
        random=rt.ctx.ports.rng.random,
        new_id=lambda: rt.new_id("message"),
    )
    await rt.hazard("agent.summary_answered")
    text = outcome.response.text.strip() or "(the summarizer returned nothing)"
    if settings.clip_chars is not None and len(text) > settings.clip_chars:
        text = text[: settings.clip_chars] + TRUNCATED
    total = window.evicted + len(evicted)
    seq = rt.alloc_seq()
    message = UserMessage(
        id=rt.new_id("message"),
        date=rt.now(),
        seq=seq,
        run_id=cp.session_id if cp is not None else None,
        content=_alert(text, total, total + len(body) - cut, rt.time_text()),
        kind="summary",
    )
    start = body[cut].seq if cut < len(body) else seq + 1
    new = ContextWindow(start, message, text, window.compactions + 1, total)
    writes = [*rt.message_writes([message]), (rt.tkeys.context, pack(new))]
    if cp is not None:
        cp = attrs.evolve(cp, updated_at=rt.now())
        writes += rt.checkpoint_writes(cp)
    await rt.write(writes, "the summary")
    rt.context = new
    rt.remember([message])
    if cp is not None:
        rt.session = cp
    await rt.hazard("agent.summary_committed")
    return CompactionResult(text, before, len(in_context(rt, body[cut:])))


async def compact_before_step(rt: AgentRuntime, cp: SessionCheckpoint, budget_chars: int) -> bool:
    """Compact (sliding window) if the context would not fit; whether it did. If the
    summarizer keeps failing, ``LlmFailure`` ends the run (``llm_api_error``, as Letta's
    failed summarization does): nothing is dropped from the prompt silently."""
    if not needs_compaction(rt, await context_body(rt), budget_chars):
        return False
    done = await compact(rt, CompactionSettings(), budget_chars=budget_chars, cp=cp)
    return done is not None


async def compact_now(rt: AgentRuntime, request: CompactMessages) -> CompactionResult:
    """``agents.messages.compact``: summarize now. A run that is still open (waiting for an
    approval, or interrupted) keeps its latest turn. With nothing to evict, the context stays
    as it is and the result says so (the current summary, the same count before and after)."""
    agent = rt.require()
    settings = CompactionSettings(
        request.mode,
        request.prompt,
        request.clip_chars,
        request.sliding_window_percentage,
        request.acknowledge,
    )
    budget = max((agent.context_window - agent.max_tokens) * 4, 4000)
    open_run = rt.session is not None and rt.session.running
    try:
        done = await compact(rt, settings, budget_chars=budget, keep_last_turn=open_run)
    except LlmFailure as failure:
        raise SummarizerError(str(failure)) from failure
    if done is not None:
        return done
    count = len(in_context(rt, await context_body(rt)))
    return CompactionResult(rt.context.text, count, count)
