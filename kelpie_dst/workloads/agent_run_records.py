"""Runs, conversations, approvals and compaction, judged by what the client was told
(``agent_run_records``, convI).

Agents (``agents``, letta_v1 with a small context window) are talked to in their own history
and in ``conversations`` conversations each, one client per thread, all at once. Each input
names its thread in a tag (``L<agent><o|c<k>>-<n>``) and asks the model (:class:`RecordsPolicy`)
for one of three shapes:

* ``reply``: a long plain answer (200 to 300 words), so every thread compacts its context by
  size every few turns (the model writes long summaries: it quotes every input, then a page of
  notes);
* ``ask``: two or three calls of ``conversation_search``, a tool that requires approval; the
  client answers each call, in a shuffled order, with an approval, a denial with a reason, or
  a result it ran itself (``success`` or ``error``), then the model answers ``done``;
* ``fail``: the model refuses the request (HTTP 400): the run ends ``llm_api_error``.

Server nodes crash and restart, idle agents move between nodes, storage fails (the runtime
gives up after two tries and reloads), so threads are loaded again from storage all the time.
Sends and answers are retried with their ``otid``.

Properties (``run_records_consistent``; the pure parts in :mod:`._run_record_checks`):

* every acknowledged run reads back (``runs.retrieve``) with its agent, its thread, its stop
  reason, the status Letta gives that stop reason, and the usage the client got; its messages
  (``runs.messages.list``) are its thread's messages of that run; its steps add up to its
  usage;
* ``runs.list`` with ``conversation_id``, ``stop_reason`` or ``statuses`` lists exactly the
  unfiltered list's runs that the filter selects, acknowledged ones included;
* ``conversations.list(order_by=last_run_completion)`` follows the conversations' latest
  completions, both ways;
* every answered call has one result, the one its decision gives (a denial carries the
  client's reason; a client's result its text and status);
* every prompt shows one thread, and every input of that thread an earlier prompt showed (in
  context, or quoted in the summary), whatever was compacted or reloaded in between.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from collections.abc import AsyncGenerator, Callable
from datetime import datetime
from typing import Any

import attrs
import httpx
import trio

import kelpie_dst
from kelpie_agent.agent import (
    ApprovalDecision,
    ApprovalRequestMessage,
    BlockCreate,
    CompactMessages,
    CreateAgent,
    InputMessage,
    Keys,
    TurnResult,
    builtin_id,
)
from kelpie_agent.agent._codec import unpack
from kelpie_agent.agent._config import LoopConfig
from kelpie_agent.agent._messages import (
    AgentMessage,
    AssistantMessage,
    SystemMessage,
    ToolCallMessage,
    ToolReturnMessage,
    UserMessage,
)
from kelpie_agent.api import create_app
from kelpie_agent.http import serve
from kelpie_agent.llm import (
    ChunkStream,
    LlmBadRequestError,
    LlmRequest,
    LlmResponse,
    StreamChunk,
    TextBlock,
    ToolCall,
    ToolResult,
)
from kelpie_agent.service import AgentService, NotFoundError, ServiceError

from .._errors import NodeDownError
from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimKVStore, SimLlmClient, open_kv, sim_ports
from ..shims.llm import Call, Reply
from ..shims.llm._summarizer import is_summary_request
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_http import RETRY_STATUS, _tls
from ._agent_schedules import _FAILURES, OPTIONS, SERVICE, Client
from ._agent_world import PORT, SERVER
from ._run_limited_reads import PartReads, check_part_reads, read_run_parts
from ._run_record_checks import (
    Answer,
    Compacted,
    Listed,
    Run,
    Shown,
    ThreadWatch,
    check_answers,
    check_calls_answered,
    check_compactions,
    check_completion_order,
    check_filters,
    check_last_message_order,
    check_message_runs,
    check_runs,
    thread_of_tag,
)

__all__ = ["RecordsPolicy", "agent_run_records", "run_records_consistent"]

PROBE = "runprobe"
RETRIES = 6  # tries of a send (the same otid) before the client gives up on it
WINDOW, MAX_TOKENS = 3000, 400
LOOP = LoopConfig(history_window=40, storage_attempts=2)
SEARCH = "conversation_search"
DATES = "conversation_search_date"  # needs no approval; asked for a range with no messages
NO_DATES = {"start_date": "2020-01-01", "end_date": "2020-01-02"}
STOPS = ("end_turn", "requires_approval", "llm_api_error")
_INPUT = re.compile(r"^(L\d+(?:o|c\d+)-\d+) " + PROBE + r" (\{.*\})$", re.S)
_WORDS = ("kelp", "tide", "otter", "reef", "current", "swell", "foam", "shoal")
_NOTES = " ".join(f"note{i} {_WORDS[i % len(_WORDS)]}" for i in range(150))  # ~1,700 chars
_MAX_PROBLEMS = 20


@attrs.define
class RecordsLog:
    agents: dict[int, str] = attrs.Factory(dict)
    conversations: dict[str, list[str]] = attrs.Factory(dict)  # agent id -> its conversations
    runs: list[Run] = attrs.Factory(list)
    answers: list[Answer] = attrs.Factory(list)
    compactions: list[Compacted] = attrs.Factory(list)
    watch: ThreadWatch = attrs.Factory(ThreadWatch)
    problems: list[str] = attrs.Factory(list)
    sends: int = 0
    refused: int = 0
    summaries: int = 0

    def problem(self, text: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(text)


def _texts(message: Any) -> list[str]:
    out = []
    for block in message.content:
        if isinstance(block, TextBlock):
            out.append(block.text)
        elif isinstance(block, ToolResult):
            out.append(block.content)
        elif isinstance(block, ToolCall):
            out.append(str(block.arguments))
    return out


def probe_of(request: LlmRequest) -> tuple[int, str, dict[str, Any]] | None:
    """The run's input (the last user text that is a probe): its position, tag and probe."""
    for position in range(len(request.messages) - 1, -1, -1):
        message = request.messages[position]
        if message.role != "user":
            continue
        for block in message.content:
            if isinstance(block, TextBlock):
                found = _INPUT.match(block.text)
                if found:
                    return position, found.group(1), json.loads(found.group(2))
    return None


def answer_words(tag: str, count: int) -> str:
    start = sum(map(ord, tag))
    words = (_WORDS[(start + 5 * i) % len(_WORDS)] for i in range(count))
    return " ".join(words) + f" end-{tag}"


class RecordsPolicy:
    """The model: answers each run in the shape its input names."""

    def __init__(self, log: RecordsLog) -> None:
        self.log = log

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        found = probe_of(request)
        if found is None:
            self.log.problem(
                f"a step does not show its run's input (last turn: "
                f"{request.messages[-1].text[:60]!r})"
            )
            return ("lost",)
        position, tag, probe = found
        first = position == len(request.messages) - 1
        shape = probe.get("shape")
        if shape == "reply":
            return (answer_words(tag, int(probe.get("words", 200))),)
        if shape == "ask":
            if first:
                calls = int(probe.get("calls", 2))
                # a search for a word no message holds: results stay small, so a run's own
                # turn never outgrows the window (the window would then be cut, summary and all)
                args = [{"query": f"qqabsent{i}", "limit": 1} for i in range(calls)]
                asks: list[str | Call] = [Call(SEARCH, a) for a in args]
                if probe.get("plain"):  # a call that needs no approval, in the same step
                    asks.insert(int(probe["plain"]) - 1, Call(DATES, dict(NO_DATES)))
                return tuple(asks)
            return (f"done {tag}",)
        return (f"unknown shape {tag}",)


class RecordsObserver:
    """Every prompt (not a summary request) must show one thread, and every input of it an
    earlier prompt showed."""

    def __init__(self, log: RecordsLog) -> None:
        self.log = log

    def observe(self, request: LlmRequest, outcome: Any, node: str | None) -> None:
        if is_summary_request(request):
            return
        found = probe_of(request)
        if found is None:
            return  # the policy reports it
        inputs: list[str] = []
        texts: list[str] = []
        for message in request.messages:
            for text in _texts(message):
                texts.append(text)
                if message.role == "user":
                    matched = _INPUT.match(text)
                    if matched:
                        inputs.append(matched.group(1))
        self.log.watch.prompt(thread_of_tag(found[1]), inputs, "\n".join(texts))


class RecordsLlm:
    """The model behind the port: a ``fail`` probe's first request is refused (400, not
    retryable), and summaries come with a page of notes after the quotes (as a real model's
    long summary would), so a summary takes a real share of the context window."""

    def __init__(self, inner: SimLlmClient, log: RecordsLog) -> None:
        self.inner = inner
        self.log = log

    def _refusal(self, request: LlmRequest) -> LlmBadRequestError | None:
        if is_summary_request(request):
            return None
        found = probe_of(request)
        if found is None or found[2].get("shape") != "fail":
            return None
        if found[0] != len(request.messages) - 1:
            return None
        return LlmBadRequestError(f"runprobe {found[1]}: the model refuses", status=400)

    async def complete(self, request: LlmRequest) -> LlmResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            await trio.sleep(0.05)
            raise refusal
        response = await self.inner.complete(request)
        if is_summary_request(request):
            self.log.summaries += 1
            text = f"{response.text} Notes: {_NOTES}"
            response = attrs.evolve(response, content=(TextBlock(text),))
        return response

    def stream(self, request: LlmRequest) -> ChunkStream:
        refusal = self._refusal(request)
        if refusal is None:
            return self.inner.stream(request)
        return ChunkStream(_refuse(refusal))


async def _refuse(error: Exception) -> AsyncGenerator[StreamChunk, None]:
    await trio.sleep(0.05)
    none: list[StreamChunk] = []  # an async generator that fails before its first chunk
    for chunk in none:
        yield chunk
    raise error


def _shown(message: AgentMessage) -> Shown:
    kind = message.message_type
    if isinstance(message, ToolReturnMessage):
        return Shown(
            message.id,
            message.run_id,
            kind,
            message.tool_call_id,
            message.status,
            message.tool_return,
        )
    if isinstance(message, ToolCallMessage):
        call = message.tool_call
        return Shown(message.id, message.run_id, kind, call.tool_call_id, None, call.arguments)
    if isinstance(message, AssistantMessage | UserMessage):
        return Shown(message.id, message.run_id, kind, None, None, str(message.content))
    return Shown(message.id, message.run_id, kind)


def _listed(record: Any) -> Listed:
    usage = record.usage
    return Listed(
        record.id,
        record.agent_id,
        record.thread_id,
        record.status,
        record.stop_reason,
        (usage.prompt_tokens, usage.completion_tokens, usage.step_count),
        record.completed_at,
        record.created_at,
    )


def stored_context_size(store: SimKVStore, thread_id: str) -> int | None:
    """How many messages the thread's context holds as the database has it now: its summary
    (if any) and its stored messages from the context's start on, summaries and the stored
    system prompt left out (docs/agent.md, "Compaction"). None: a record that cannot be read.
    A pure read of the committed store: no event, no draw."""
    keys = Keys(thread_id)
    try:
        raw = store._get(keys.context)
        window = unpack(raw) if raw is not None else None
        start = 0 if window is None else window.start_seq
        rows = store._scan(keys.message(max(start, 1)), Keys.prefix_end(keys.messages), None, False)
        body = [unpack(value) for _, value in rows]
    except Exception:
        return None
    kept = [
        m
        for m in body
        if m.seq >= start
        and not (isinstance(m, UserMessage) and m.kind == "summary")
        and not (isinstance(m, SystemMessage) and m.kind == "prompt")
    ]
    return len(kept) + (1 if window is not None and window.summary is not None else 0)


class ThreadDriver:
    """The client of one thread (an agent's own history, or one of its conversations)."""

    def __init__(
        self,
        client: Client,
        reader: Reader,
        log: RecordsLog,
        number: int,
        agent: str,
        conv: str | None,
        label: str,
        plain: bool = False,
        store: Callable[[], SimKVStore] | None = None,
        empty_results: bool = False,
    ) -> None:
        self.client = client
        self.empty_results = empty_results  # a client's own result is sometimes "" (rtW)
        self.store = store  # the database's store, peeked at by the compaction check
        self.reader = reader
        self.log = log
        self.rng = client.rng
        self.number = number
        self.agent = agent
        self.conv = conv
        self.label = label
        self.k = 0
        self.plain = plain
        self.stuck = False
        self.idle = True  # no run of this thread is open (the last send was answered)

    async def _send(self, inputs: tuple[InputMessage, ...], tries: int) -> TurnResult | None:
        agent, conv = self.agent, self.conv
        for _ in range(tries):
            try:
                return await self.client.once(
                    lambda s: s.send_message(agent, inputs, max_steps=6, conversation_id=conv)
                )
            except _FAILURES:
                await trio.sleep(self.rng.uniform(0.5, 2.0))
            except ServiceError:
                self.log.refused += 1
                return None
        return None

    def _record(self, result: TurnResult, tag: str, answer: str | None = None) -> None:
        usage = result.usage
        if result.stop_reason == "error":  # the loop's catch-all: nothing here should raise
            self.log.problem(f"run {result.run_id} ({tag}) ended with an error: {result.error}")
        if answer is not None and result.stop_reason == "end_turn":
            said = [m.content for m in result.messages if isinstance(m, AssistantMessage)]
            if not any(answer in text for text in said):
                self.log.problem(
                    f"run {result.run_id} ({tag}) was acknowledged end_turn without the "
                    f"model's reply {answer!r}"
                )
        self.log.runs.append(
            Run(
                result.run_id,
                self.agent,
                self.conv,
                result.stop_reason,
                (usage.prompt_tokens, usage.completion_tokens, usage.step_count),
                tag,
                answer,
            )
        )

    async def turn(self) -> None:
        rng = self.rng
        self.k += 1
        tag = f"L{self.number}{self.label}-{self.k}"
        shape = rng.choices(("reply", "ask", "fail", "compact"), weights=(6, 3, 1, 1))[0]
        if shape == "compact":
            await self._compact()
            return
        probe: dict[str, Any] = {"shape": shape}
        if shape == "reply":
            probe["words"] = rng.randint(200, 300)
        elif shape == "ask":
            probe["calls"] = rng.randint(2, 3)
            if self.plain and rng.random() < 0.5:  # where the plain call goes among the asks
                probe["plain"] = rng.randint(1, probe["calls"] + 1)
        text = f"{tag} {PROBE} {json.dumps(probe, sort_keys=True)}"
        self.log.sends += 1
        result = await self._send((InputMessage("user", text, otid=f"otid-{tag}"),), RETRIES)
        self.idle = result is not None and result.stop_reason != "requires_approval"
        if result is None:
            return
        self._record(result, tag, f"end-{tag}" if shape == "reply" else None)
        if result.stop_reason == "requires_approval":
            await self._answer(result, tag)

    async def _asks(self, result: TurnResult) -> list[ApprovalRequestMessage]:
        asks = [m for m in result.messages if isinstance(m, ApprovalRequestMessage)]
        if asks:
            return asks
        agent, conv = self.agent, self.conv
        page = await self.client.until_done(
            lambda s: s.list_messages(agent, limit=20, order="desc", conversation_id=conv)
        )
        return [
            m for m in page if isinstance(m, ApprovalRequestMessage) and m.run_id == result.run_id
        ]

    async def _answer(self, result: TurnResult, tag: str) -> None:
        rng = self.rng
        decisions: list[ApprovalDecision] = []
        answers: list[Answer] = []
        for i, ask in enumerate(await self._asks(result)):
            call_id = ask.tool_call.tool_call_id
            kind = rng.choice(("approve", "deny", "client"))
            if kind == "approve":
                decisions.append(ApprovalDecision(call_id, True))
                answers.append(Answer(self.agent, self.conv, call_id, kind))
            elif kind == "deny":
                reason = f"not now {tag} {i}"
                decisions.append(ApprovalDecision(call_id, False, reason))
                answers.append(Answer(self.agent, self.conv, call_id, kind, reason))
            else:
                said = f"client ran {tag} {i}"
                if self.empty_results and rng.random() < 0.5:
                    said = ""  # a client-side tool that printed nothing
                status = rng.choice(("success", "error"))
                decisions.append(ApprovalDecision(call_id, True, None, said, status))  # type: ignore[arg-type]
                answers.append(Answer(self.agent, self.conv, call_id, kind, said, status))
        if not decisions:
            self.stuck = True
            return
        rng.shuffle(decisions)
        self.log.answers += answers
        message = InputMessage("approval", "", otid=f"answer-{tag}", approvals=tuple(decisions))
        done = await self._send((message,), RETRIES * 3)
        if done is None:
            self.stuck = True  # the thread waits for an answer that never landed
            return
        for answer in answers:
            answer.acked = True
        self._record(done, tag, f"done {tag}")
        self.idle = done.stop_reason != "requires_approval"

    async def _compact(self) -> None:
        """``messages.compact`` on this thread, in a mode, clip and percentage drawn here."""
        rng = self.rng
        mode = rng.choice(("sliding_window", "all"))
        clip = rng.randint(300, 1200) if rng.random() < 0.5 else None
        percentage = rng.choice((0.2, 0.3, 0.5))
        request = CompactMessages(mode, None, clip, percentage, thread=self.conv)
        thread = f"L{self.number}{self.label}"
        if clip is not None:
            self.log.watch.forget(thread)
        agent, idle = self.agent, self.idle
        for _ in range(RETRIES):
            try:
                before, after, summary = await self.reader.compact(agent, request)
            except _FAILURES:
                await trio.sleep(self.rng.uniform(0.5, 2.0))
                continue
            except Refused:
                self.log.refused += 1
                return
            stored = None
            if idle and self.store is not None:
                stored = stored_context_size(self.store(), self.conv or agent)
            self.log.compactions.append(
                Compacted(thread, mode, clip, percentage, idle, before, after, summary, stored)
            )
            return

    async def run(self, span: float) -> None:
        deadline = trio.current_time() + span
        while trio.current_time() < deadline and not self.stuck:
            await self.turn()
            await trio.sleep(self.rng.uniform(0.1, 1.0))


@attrs.define
class Reads:
    """What the read API answered at the end, per agent."""

    threads: dict[tuple[str, str | None], list[Shown]] = attrs.Factory(dict)
    every: dict[str, list[Listed]] = attrs.Factory(dict)
    filtered: dict[str, dict[str, list[str]]] = attrs.Factory(dict)
    completion: dict[str, dict[bool, list[str]]] = attrs.Factory(dict)
    # with last_message_reads: conversations.list(order_by=last_message_at), both ways
    by_message: dict[str, dict[bool, list[tuple[str, float | None]]]] = attrs.Factory(dict)
    records: dict[str, Listed | None] = attrs.Factory(dict)
    run_messages: dict[str, list[Shown]] = attrs.Factory(dict)
    steps: dict[str, list[tuple[int, int]]] = attrs.Factory(dict)
    last_messages: bool = False  # param last_message_reads
    parts: PartReads | None = None  # param run_traces: each run's parts, whole and limited
    message_runs: bool = False  # param message_runs: judge every message's run


class Refused(Exception):
    """The server answered a request with a refusal (not a failure worth retrying)."""


class DirectReader:
    """The read API through a live node's service (Python calls)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def _page(self, agent: str, conv: str | None, after: str | None) -> list[Shown]:
        page = await self.client.until_done(
            lambda s: s.list_messages(
                agent, after=after, limit=100, order="asc", conversation_id=conv
            )
        )
        return [_shown(m) for m in page]

    async def thread(self, agent: str, conv: str | None) -> list[Shown]:
        out: list[Shown] = []
        after: str | None = None
        while True:
            page = await self._page(agent, conv, after)
            out += page
            if len(page) < 100:
                return out
            after = page[-1].id

    async def runs(self, agent: str, **filters: Any) -> list[Listed]:
        records = await self.client.until_done(
            lambda s: s.list_runs(agent_ids=[agent], limit=1000, order="asc", **filters)
        )
        return [_listed(r) for r in records]

    async def by_completion(self, agent: str, order: str) -> list[str]:
        listed = await self.client.until_done(
            lambda s: s.list_conversations(
                agent_id=agent, order_by="last_run_completion", order=order, limit=100
            )
        )
        return [c.id for c in listed]

    async def by_last_message(self, agent: str, order: str) -> list[tuple[str, float | None]]:
        listed = await self.client.until_done(
            lambda s: s.list_conversations(
                agent_id=agent, order_by="last_message_at", order=order, limit=100
            )
        )
        return [(c.id, c.last_message_at) for c in listed]

    async def run(self, rid: str) -> tuple[Listed, list[Shown], list[tuple[int, int]]] | None:
        try:
            record = await self.client.until_done(lambda s: s.get_run(rid))
        except NotFoundError:
            return None
        messages = await self.client.until_done(lambda s: s.run_messages(rid, limit=1000))
        steps = await self.client.until_done(lambda s: s.run_steps(rid, limit=1000))
        return (
            _listed(record),
            [_shown(m) for m in messages],
            [(x.prompt_tokens, x.completion_tokens) for x in steps],
        )

    async def filtered(self, conv: str) -> list[str]:
        """Every agent's messages filtered by the conversation (their ids)."""
        found = await self.client.until_done(
            lambda s: s.all_messages(conversation_id=conv, order="asc", limit=1000)
        )
        return [m.id for m in found]

    async def part(self, rid: str, route: str, limit: int) -> list[Any] | None:
        """The run's trace, steps or messages (``route``), at most ``limit`` of them."""
        reads = {
            "trace": lambda s: s.run_trace(rid, limit),
            "steps": lambda s: s.run_steps(rid, limit=limit),
            "messages": lambda s: s.run_messages(rid, limit=limit),
        }
        try:
            found: list[Any] = await self.client.until_done(reads[route])
        except NotFoundError:
            return None
        return found

    async def compact(self, agent: str, request: CompactMessages) -> tuple[int, int, str]:
        """One attempt (``_FAILURES`` when the node failed, :class:`Refused` when refused)."""
        try:
            result = await self.client.once(lambda s: s.compact_messages(agent, request))
        except ServiceError as error:
            raise Refused(str(error)) from None
        return result.num_messages_before, result.num_messages_after, result.summary


def _epoch(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def _json_shown(m: dict[str, Any]) -> Shown:
    kind = m.get("message_type", "")
    if kind == "tool_return_message":
        return Shown(
            m["id"],
            m.get("run_id"),
            kind,
            m.get("tool_call_id"),
            m.get("status"),
            str(m.get("tool_return", "")),
        )
    if kind in ("tool_call_message", "approval_request_message"):
        call = m.get("tool_call") or {}
        return Shown(
            m["id"],
            m.get("run_id"),
            kind,
            call.get("tool_call_id"),
            None,
            str(call.get("arguments", "")),
        )
    return Shown(m["id"], m.get("run_id"), kind, None, None, str(m.get("content", "")))


def _json_listed(r: dict[str, Any], usage: tuple[int, int, int] = (0, 0, 0)) -> Listed:
    return Listed(
        r["id"],
        r["agent_id"],
        r.get("conversation_id"),
        r["status"],
        r.get("stop_reason"),
        usage,
        _epoch(r.get("completed_at")),
        _epoch(r.get("created_at")) or 0.0,
    )


class HttpReader:
    """The read API through Letta's REST routes (JSON over the simulated network), each
    request to a random live node, retried on another after a failure or a 408/429/5xx."""

    def __init__(self, http: httpx.AsyncClient, client: Client) -> None:
        self.http = http
        self.client = client
        self.rng = client.rng

    def _node(self) -> str:
        live = sorted(n for n, s in self.client.services.items() if s.running)
        if not live:
            raise NodeDownError("no server node is up")
        return self.rng.choice(live)

    async def _once(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = f"http://{self._node()}:{PORT}{path}"
        try:
            with trio.fail_after(60):
                got = await self.http.request(method, url, **kwargs)
        except httpx.TransportError as error:
            raise NodeDownError(f"{method} {path}: {type(error).__name__}") from None
        if got.status_code in RETRY_STATUS:
            raise NodeDownError(f"{method} {path}: {got.status_code}")
        return got

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """Retried until it is answered; a 404 is None; any other refusal is an error."""
        while True:
            try:
                got = await self._once(method, path, **kwargs)
            except _FAILURES:
                await trio.sleep(self.rng.uniform(0.5, 2.0))
                continue
            if got.status_code == 404:
                return None
            if got.status_code >= 400:
                raise AssertionError(f"{method} {path}: {got.status_code} {got.text[:200]}")
            return got.json()

    async def thread(self, agent: str, conv: str | None) -> list[Shown]:
        path = f"/v1/conversations/{conv}/messages" if conv else f"/v1/agents/{agent}/messages"
        out: list[Shown] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"order": "asc", "limit": 100}
            if after is not None:
                params["after"] = after
            page = await self._call("GET", path, params=params) or []
            out += [_json_shown(m) for m in page]
            if len(page) < 100:
                return out
            after = page[-1]["id"]

    async def runs(self, agent: str, **filters: Any) -> list[Listed]:
        params: dict[str, Any] = {"agent_id": agent, "limit": 1000, "order": "asc"}
        for name, value in filters.items():
            params[name] = list(value) if isinstance(value, tuple) else value
        found = await self._call("GET", "/v1/runs/", params=params) or []
        return [_json_listed(r) for r in found]

    async def by_completion(self, agent: str, order: str) -> list[str]:
        params = {"agent_id": agent, "order_by": "last_run_completion", "order": order}
        found = await self._call("GET", "/v1/conversations/", params=dict(params, limit=100))
        return [c["id"] for c in found or []]

    async def by_last_message(self, agent: str, order: str) -> list[tuple[str, float | None]]:
        params = {"agent_id": agent, "order_by": "last_message_at", "order": order}
        found = await self._call("GET", "/v1/conversations/", params=dict(params, limit=100))
        return [(c["id"], _epoch(c.get("last_message_at"))) for c in found or []]

    async def run(self, rid: str) -> tuple[Listed, list[Shown], list[tuple[int, int]]] | None:
        record = await self._call("GET", f"/v1/runs/{rid}")
        if record is None:
            return None
        usage = await self._call("GET", f"/v1/runs/{rid}/usage") or {}
        messages = await self._call("GET", f"/v1/runs/{rid}/messages", params={"limit": 1000})
        steps = await self._call("GET", f"/v1/runs/{rid}/steps", params={"limit": 1000}) or []
        tokens = [(int(x["prompt_tokens"] or 0), int(x["completion_tokens"] or 0)) for x in steps]
        counted = (usage.get("prompt_tokens", -1), usage.get("completion_tokens", -1), len(steps))
        return (
            _json_listed(record, counted),
            [_json_shown(m) for m in messages or []],
            tokens,
        )

    async def filtered(self, conv: str) -> list[str]:
        """``GET /v1/messages/?conversation_id=...`` (the message ids)."""
        params = {"conversation_id": conv, "order": "asc", "limit": 1000}
        return [m["id"] for m in await self._call("GET", "/v1/messages/", params=params) or []]

    async def part(self, rid: str, route: str, limit: int) -> list[Any] | None:
        """``GET /v1/runs/{rid}/<route>?limit=...`` (trace, steps or messages)."""
        found = await self._call("GET", f"/v1/runs/{rid}/{route}", params={"limit": limit})
        return None if found is None else list(found)

    async def compact(self, agent: str, request: CompactMessages) -> tuple[int, int, str]:
        settings: dict[str, Any] = {
            "mode": request.mode,
            "clip_chars": request.clip_chars,
            "sliding_window_percentage": request.sliding_window_percentage,
        }
        if request.thread is not None:
            path = f"/v1/conversations/{request.thread}/compact"
            body: dict[str, Any] = {"agent_id": agent, "compaction_settings": settings}
        else:
            path, body = f"/v1/agents/{agent}/summarize", {"compaction_settings": settings}
        got = await self._once("POST", path, json=body)
        if got.status_code >= 400:
            raise Refused(f"POST {path}: {got.status_code} {got.text[:200]}")
        data = got.json()
        return data["num_messages_before"], data["num_messages_after"], data["summary"]


Reader = DirectReader | HttpReader


async def _read_agent(reader: Reader, log: RecordsLog, reads: Reads, agent: str) -> None:
    convs = log.conversations.get(agent, [])
    for conv in (None, *convs):
        reads.threads[(agent, conv)] = await reader.thread(agent, conv)
    parts = reads.parts
    for conv in convs if parts is not None else ():
        listed = await reader.filtered(conv)
        own = [m.id for m in await reader.thread(agent, conv)]
        if parts is not None and own == [m.id for m in reads.threads[(agent, conv)]]:
            parts.filtered[conv] = (tuple(own), tuple(listed))  # the thread stood still
    for _ in range(5):  # until the runs list stands still around the filtered reads
        every = await reader.runs(agent)
        filtered: dict[str, list[str]] = {}
        for conv in convs:
            found = await reader.runs(agent, conversation_id=conv)
            filtered[f"conversation:{conv}"] = [r.run_id for r in found]
        for stop in STOPS:
            found = await reader.runs(agent, stop_reason=stop)
            filtered[f"stop_reason:{stop}"] = [r.run_id for r in found]
        for status in ("completed", "failed"):
            found = await reader.runs(agent, statuses=(status,))
            filtered[f"status:{status}"] = [r.run_id for r in found]
        completion: dict[bool, list[str]] = {}
        for descending in (True, False):
            completion[descending] = await reader.by_completion(
                agent, "desc" if descending else "asc"
            )
        if every == await reader.runs(agent):
            break
    reads.every[agent], reads.filtered[agent] = every, filtered
    reads.completion[agent] = completion
    if reads.last_messages:
        reads.by_message[agent] = {
            descending: await reader.by_last_message(agent, "desc" if descending else "asc")
            for descending in (True, False)
        }
    for run in log.runs:
        if run.agent_id != agent:
            continue
        found_run = await reader.run(run.run_id)
        if found_run is None:
            reads.records[run.run_id] = None
            continue
        record, messages, steps = found_run
        reads.records[run.run_id] = record
        reads.run_messages[run.run_id] = messages
        reads.steps[run.run_id] = steps
        if reads.parts is not None:
            await read_run_parts(reader.part, run.run_id, reads.parts)


def _start_servers(
    ctx: WorkloadContext, log: RecordsLog, db: kelpie_dst.Node, http: bool
) -> dict[str, AgentService]:
    from kelpie_agent.service import open_agent_node

    services: dict[str, AgentService] = {}
    timing = LlmTiming(ttft_min=0.05, ttft_max=0.3, tokens_per_second=400.0)

    async def server(node: kelpie_dst.Node) -> None:
        sim = SimLlmClient(RecordsPolicy(log), timing=timing, observer=RecordsObserver(log))
        async with open_agent_node(
            open_kv(node, host=db),
            sim_ports(node),
            node_id=node.name,
            llm=RecordsLlm(sim, log),
            loop_config=LOOP,
            dispatcher_options=OPTIONS,
            options=SERVICE,
            observer=kelpie_dst.log,
            **coherence_options(ctx, db),
        ) as service:
            services[node.name] = service
            if http:  # Letta's REST routes too, for the reads (and compactions)
                await serve(create_app(service), "0.0.0.0", PORT, SERVER)
            await trio.sleep_forever()

    for name in ctx.topology.nodes or ("server-1", "server-2"):
        ctx.sim.add_node(name, server)
    return services


async def _make_agent(
    client: Client, log: RecordsLog, number: int, conversations: int, plain: bool
) -> str:
    request = CreateAgent(
        name=f"records-{number}",
        agent_type="letta_v1_agent",
        memory_blocks=(BlockCreate("persona", f"I am records agent {number}.", limit=2000),),
        tool_ids=(builtin_id(SEARCH), builtin_id(DATES)) if plain else (builtin_id(SEARCH),),
        context_window=WINDOW,
        max_tokens=MAX_TOKENS,
    )
    view = await client.until_done(lambda s: s.create_agent(request))
    agent: str = view.agent.id
    log.agents[number] = agent
    await client.until_done(lambda s: s.set_tool_approval(agent, SEARCH, True))
    convs: list[str] = []
    while len(convs) < conversations:
        try:  # a create is not retried behind the client's back: one that failed is unused
            record = await client.once(lambda s: s.create_conversation(agent))
        except _FAILURES:
            await trio.sleep(client.rng.uniform(0.5, 2.0))
            continue
        convs.append(record.id)
    log.conversations[agent] = convs
    return agent


@workload(
    params={
        "agents": 2,
        "conversations": 2,
        "span": 60.0,
        "via": "direct",
        "plain_calls": False,
        "last_message_reads": False,  # also list conversations by last_message_at, both ways
        "run_traces": False,  # also read each run's trace, steps and messages by limit (svcT)
        "empty_client_results": False,  # half the client's own results are "" (rtW)
        "message_runs": False,  # judge that every message names a run of its thread (rtW)
    },
    bounds={"agents": (1, 10), "conversations": (1, 5), "span": (1, 3600)},
)
async def agent_run_records(ctx: WorkloadContext) -> None:
    """Runs, conversations, approvals and compaction; see the module docstring."""
    log = RecordsLog()
    ctx.state["records"] = log
    db = ctx.sim.add_node(ctx.topology.database or "db")
    via = str(ctx.params["via"])
    if via not in ("direct", "http"):
        raise ValueError(f"workload.params.via: 'direct' or 'http', got {via!r}")
    services = _start_servers(ctx, log, db, via == "http")
    async with contextlib.AsyncExitStack() as stack:
        setup = Client(ctx, services, "records/setup")
        if via == "http":
            http = await stack.enter_async_context(
                httpx.AsyncClient(timeout=httpx.Timeout(30.0), verify=_tls())
            )
            reader: Reader = HttpReader(http, Client(ctx, services, "records/http"))
        else:
            reader = DirectReader(setup)
        await _drive(ctx, log, services, setup, reader, db)


async def _drive(
    ctx: WorkloadContext,
    log: RecordsLog,
    services: dict[str, AgentService],
    setup: Client,
    reader: Reader,
    db: kelpie_dst.Node,
) -> None:
    drivers: list[ThreadDriver] = []

    def store() -> SimKVStore:
        return open_kv(db).store

    for n in range(int(ctx.params["agents"])):
        plain = bool(ctx.params["plain_calls"])
        agent = await _make_agent(setup, log, n, int(ctx.params["conversations"]), plain)
        threads: list[tuple[str | None, str]] = [(None, "o")]
        threads += [(c, f"c{i}") for i, c in enumerate(log.conversations[agent])]
        for conv, label in threads:
            client = Client(ctx, services, f"records/{n}/{label}")
            empty = bool(ctx.params["empty_client_results"])
            drivers.append(
                ThreadDriver(client, reader, log, n, agent, conv, label, plain, store, empty)
            )
    span = float(ctx.params["span"])
    async with trio.open_nursery() as nursery:
        for driver in drivers:
            nursery.start_soon(driver.run, span)
    reads = Reads(last_messages=bool(ctx.params["last_message_reads"]))
    reads.message_runs = bool(ctx.params["message_runs"])
    if ctx.params["run_traces"]:
        reads.parts = PartReads()
    for agent in log.agents.values():
        await _read_agent(reader, log, reads, agent)
    ctx.state["reads"] = reads
    if reads.parts is not None:
        ctx.metric("records.parts_judged", len(reads.parts.whole))
        ctx.metric("records.parts_unsettled", reads.parts.unsettled)
    ctx.metric("records.sends", log.sends)
    ctx.metric("records.runs", len(log.runs))
    ctx.metric("records.answers", sum(a.acked for a in log.answers))
    ctx.metric("records.summaries", log.summaries)
    ctx.metric("records.compactions", len(log.compactions))
    ctx.metric("records.prompts", log.watch.prompts)
    ctx.metric("records.stuck", sum(d.stuck for d in drivers))
    stops: dict[str, int] = {}
    for run in log.runs:
        stops[run.stop_reason] = stops.get(run.stop_reason, 0) + 1
    for reason, count in sorted(stops.items()):
        ctx.metric(f"records.stop.{reason}", count)


def check_records(log: RecordsLog, reads: Reads) -> list[str]:
    problems = check_runs(log.runs, reads.records, reads.run_messages, reads.threads, reads.steps)
    for agent, every in reads.every.items():
        problems += check_filters(agent, every, reads.filtered.get(agent, {}), log.runs)
        for descending, listed in reads.completion.get(agent, {}).items():
            problems += check_completion_order(agent, every, listed, descending)
        for descending, pairs in reads.by_message.get(agent, {}).items():
            problems += check_last_message_order(
                agent, every, pairs, descending, reads.run_messages
            )
    problems += check_answers(log.answers, reads.threads)
    problems += check_calls_answered(reads.threads, reads.every, log.answers)
    if reads.message_runs:
        problems += check_message_runs(reads.threads, reads.every)
    problems += check_compactions(log.compactions, LOOP.history_window)
    if reads.parts is not None:
        problems += check_part_reads(reads.parts)
    return problems + log.problems + log.watch.problems


@invariant
def run_records_consistent(ctx: WorkloadContext) -> None:
    """Runs, their messages and steps, the lists, approvals and prompts agree with what the
    client sent and was told; see :func:`check_records`."""
    log: RecordsLog = ctx.state["records"]
    reads: Reads | None = ctx.state.get("reads")
    problems = (check_records(log, reads) if reads is not None else []) + (
        [] if reads is not None else log.problems + log.watch.problems
    )
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
