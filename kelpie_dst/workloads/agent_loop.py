"""The agent loop's shapes under faults, judged at its boundaries (``agent_loop``, loopH).

Server nodes (``topology.nodes``) share the database host and a model (:class:`LoopPolicy`)
that answers each run in the *shape* its input asks for (``loopprobe {"shape": ...}``), the
shapes a real model makes and the loop must end correctly:

* ``long`` (letta_v1, ``max_tokens`` 40): a plain-text answer of 30 to 50 words ending with
  ``end-<tag>``; past 40 tokens the model stops at ``max_tokens`` with the text cut;
* ``blank`` (letta_v1, token-streamed): a whitespace-only text block (as real models open a
  tool-use answer with ``"\\n\\n"``), then two tool calls, then a reply;
* ``chain`` (letta_v1): a tool call every step, so the run runs into its ``max_steps``;
* ``empty`` (letta_v1): nothing at all, every step;
* ``thoughts`` (memgpt): thoughts without a tool, every step, with a ``max_steps`` of 8, 1 or 2
  (so the one reminder a memgpt agent gets sometimes does not fit the step budget);
* ``beats`` (memgpt): 4 to 6 tool calls with heartbeats, then ``send_message``; the nodes keep
  a small ``history_window``, so the agent compacts its context in the middle of such runs;
* ``chat`` (letta_v1 with a small context window and a large persona): 300-word answers, so
  the agent compacts by size.
* ``required`` (letta_v1 with a ``required_before_exit`` rule on ``conversation_search``,
  ``ruled`` agents): a text answer without the tool, then, when reminded, the tool (again
  while it fails), then a reply; ``max_steps`` is 1, 2, 3 or 8, so the reminder sometimes does
  not fit the budget (then the text ends the run: a reminder is only sent when a step is left
  to answer it).

* ``desk`` (letta_v1): a call of an MCP tool that echoes, or of one whose server answers
  every call with an ``isError`` result in plain words, then a reply.
* ``bulky`` (letta_v1 with a small context window, ``bulky`` agents; off by default): a call
  of the echoing MCP tool with about 5,500 characters, then a reply, so the history is mostly
  large tool results and the window must count them to fit (``scenarios/agent_loop_bulky.toml``).

Sends are plain, streamed, or streamed token by token, and a failed send is retried with its
otid (a resumed run's answer is judged too); servers crash and restart; storage fails often
and the runtime gives up after two tries, so steps fail to commit; the model rate-limits (429
with a ``retry-after`` of 8 s), overloads, cuts streams and stops at ``max_tokens`` now and
then.

Properties (``loop_contract``; :mod:`._agent_loop_checks`, plus the model-side ones):
endings and budgets exact, token streams adding up to what is stored, streams showing only
what is stored, well-formed calls never refused, one result per call, failed MCP calls
reported failed, every step of a run showing the run's input, every prompt within the agent's
context window, and no retry of a rate-limited request before its ``retry-after``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

import kelpie_dst
from kelpie_agent.agent import (
    BlockCreate,
    CreateAgent,
    InputMessage,
    ToolRule,
    ToolStore,
    TurnResult,
    builtin_id,
)
from kelpie_agent.agent._config import LoopConfig
from kelpie_agent.agent._messages import (
    AssistantMessage,
    ReasoningMessage,
    ToolCallMessage,
    ToolReturnMessage,
)
from kelpie_agent.llm import LlmRequest, TextBlock, ToolResult
from kelpie_agent.mcp import McpClient, McpServerConfig
from kelpie_agent.service import AgentService, ServiceError

from ..scenario import WorkloadContext, invariant, workload
from ..shims import LlmTiming, SimLlmClient, open_direct_kv, open_kv, sim_ports
from ..shims._mcp import SimMcpServer, sim_mcp_transport
from ..shims.llm import Call, Reply
from ..shims.llm._engine import StreamShape
from ..shims.llm._faults import Failure
from ..shims.llm._summarizer import is_summary_request
from ._agent_budgets import (
    Attempts,
    check_invalid_streaks,
    check_llm_attempts,
    check_tool_budget,
)
from ._agent_bulk import bulk_archive
from ._agent_coherence import coherence_options
from ._agent_coherence import memory_matches_storage as memory_matches_storage
from ._agent_loop_checks import (
    Piece,
    Send,
    Stored,
    check_endings,
    check_mcp_verdicts,
    check_one_result_per_call,
    check_streams_stored,
    check_token_streams,
    check_valid_calls_run,
)
from ._agent_schedules import _FAILURES, OPTIONS, SERVICE, Client
from ._run_record_checks import expected_status

__all__ = ["LoopObserver", "LoopPolicy", "agent_loop", "loop_contract"]

PROBE = "loopprobe"
RETRIES = 6  # tries of a send (the same otid) before the client gives up on it
LONG_MAX_TOKENS = 40
CHAT_WINDOW, CHAT_MAX_TOKENS = 3200, 500
TOLERANCE = 300  # characters a prompt may exceed its window by (notes of a trimmed window)
LOOP = LoopConfig(history_window=16, storage_attempts=2)
_PERSONA = re.compile(r"I am loop agent (\d+)\.")
_WORDS = ("kelp", "tide", "otter", "reef", "current", "swell", "foam", "shoal")
_MAX_PROBLEMS = 20
DESK, LOOKUP, REFUSE = "desk", "desk_lookup", "desk_refuse"
REFUSAL = "quota exceeded for this desk today"  # an isError result that does not say "Error"
DESK_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
SHAPES = {
    "letta": ("long", "long", "blank", "blank", "chain", "empty", "desk"),
    "memgpt": ("thoughts", "beats", "beats"),
    "chat": ("chat",),
    "ruled": ("required",),
    "flood": ("flood", "flood", "chain"),
    "budget": ("junk", "spree"),  # the loop's budgets (coreJ): off unless the budget param
    "bulky": ("bulky",),  # large tool results (reqK): off unless the bulky param
}
BULKY_WINDOW, BULKY_MAX_TOKENS = 7000, 2500
BULKY_WORDS = 1000  # words the bulky shape's call echoes (about 5,500 characters)
FLOOD_BATCH = 34  # calls per step of a flood run: the third step crosses the run's budget
FLOOD_CALLS = 3 * FLOOD_BATCH
PAST = {"start_date": "2001-01-01", "end_date": "2001-01-02"}
BUDGET_REFUSED = "tool call budget exhausted"  # the loop's refusal past max_tool_calls
RULED_TOOL = "conversation_search"
REMINDED = "ToolRuleViolated"  # the loop's reminder of an uncalled required_before_exit tool
JUNK_TOOL = "desk_shredder"  # a tool no agent has: every call of it is refused
SPREE_CALLS = 3  # the spree shape's calls per step (distinct queries)


@attrs.define
class AgentInfo:
    number: int
    id: str
    kind: str  # letta, memgpt, chat, ruled, flood, budget, bulk or bulky
    context_window: int
    max_tokens: int


@attrs.define
class LoopLog:
    agents: dict[int, AgentInfo] = attrs.Factory(dict)
    tool_ids: dict[str, str] = attrs.Factory(dict)  # the MCP tools, by name
    sends: list[Send] = attrs.Factory(list)
    stored: dict[str, Stored] = attrs.Factory(dict)
    problems: list[str] = attrs.Factory(list)
    runs: list[tuple[str, str, str | None]] = attrs.Factory(list)  # id, status, stop reason
    bulk: int = 0  # passages the bulk agents inserted
    requests: int = 0
    fill: int = 0  # the fullest prompt, per mille of its agent's context window
    rate_limited: int = 0
    retried: int = 0
    max_tool_calls: int = LOOP.max_tool_calls
    attempts: dict[int, Attempts] = attrs.Factory(dict)  # id(request) -> its attempts
    held: list[LlmRequest] = attrs.Factory(list)  # keeps those ids unique
    observed: int = 0  # model attempts so far
    summaries: list[int] = attrs.Factory(list)  # the attempts that were summary requests

    def problem(self, text: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(text)


def _agent_of(log: LoopLog, request: LlmRequest) -> AgentInfo | None:
    found = _PERSONA.search(request.system)
    return log.agents.get(int(found.group(1))) if found else None


def _input_of(request: LlmRequest) -> tuple[int, dict[str, Any]] | None:
    """The run's input (the last user text that is a probe) and its position, if in view."""
    for position in range(len(request.messages) - 1, -1, -1):
        message = request.messages[position]
        if message.role != "user":
            continue
        for block in message.content:
            if isinstance(block, TextBlock) and block.text.startswith(PROBE + " "):
                try:
                    probe = json.loads(block.text[len(PROBE) + 1 :])
                except ValueError:
                    return None
                return (position, probe) if isinstance(probe, dict) else None
    return None


def _results_after(request: LlmRequest, position: int) -> int:
    return sum(
        1
        for message in request.messages[position + 1 :]
        for block in message.content
        if isinstance(block, ToolResult)
    )


def answer_words(tag: str, count: int) -> str:
    """``count`` words (chosen by the tag, no randomness), then the answer's end marker."""
    start = sum(map(ord, tag))
    words = (_WORDS[(start + 5 * i) % len(_WORDS)] for i in range(count))
    return " ".join(words) + f" end-{tag}"


class LoopPolicy:
    """The model: answers each run in the shape its input names; checks that every step of a
    run shows the run's input."""

    def __init__(self, log: LoopLog) -> None:
        self.log = log

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        agent = _agent_of(self.log, request)
        found = _input_of(request)
        memgpt = agent is not None and agent.kind == "memgpt"
        if found is None:
            self.log.problem(
                f"a step of {agent.id if agent else 'an unknown agent'} does not show its run's "
                f"input (last turn: {request.messages[-1].text[:60]!r})"
            )
            return (Call("send_message", {"message": "lost"}),) if memgpt else ("lost",)
        position, probe = found
        shape, tag = str(probe.get("shape")), str(probe.get("tag"))
        first = position == len(request.messages) - 1
        done = _results_after(request, position)
        if shape == "long":
            return (answer_words(tag, int(probe.get("words", 30))),)
        if shape == "chat":
            return (answer_words(tag, 300),)
        if shape == "blank":
            if first:
                return (
                    "\n\n",
                    Call("conversation_search", {"query": f"{tag} a"}),
                    Call("conversation_search", {"query": f"{tag} bbbb", "limit": 3}),
                )
            return (f"done {tag}",)
        if shape == "chain":
            query = f"{tag} {rng.randint(0, 10**9)}"
            return (Call("conversation_search", {"query": query}),)
        if shape == "empty":
            return ()
        if shape == "bulky":
            if first:
                text = " ".join(
                    _WORDS[(i * 7 + len(tag)) % len(_WORDS)] for i in range(BULKY_WORDS)
                )
                return (Call(LOOKUP, {"text": f"{tag} {text}"}),)
            return (f"done {tag}",)
        if shape == "desk":
            if first:
                tool = REFUSE if probe.get("refuse") else LOOKUP
                return (Call(tool, {"text": tag}),)
            return (f"done {tag}",)
        if shape == "thoughts":
            return (f"thinking about {tag}",)
        if shape == "junk":  # an unknown tool every step: refused until invalid_tool_call
            return (Call(JUNK_TOOL, {"text": f"{tag} {done}"}),)
        if shape == "spree":  # distinct searches every step, past max_tool_calls
            return tuple(
                Call("conversation_search", {"query": f"{tag} {done} {i}"})
                for i in range(SPREE_CALLS)
            )
        if shape == "required":
            results = [
                block
                for message in request.messages[position + 1 :]
                for block in message.content
                if isinstance(block, ToolResult)
            ]
            if any('"status": "OK"' in block.content for block in results):
                return (f"done {tag}",)
            last = request.messages[-1].content
            if results or any(isinstance(b, TextBlock) and REMINDED in b.text for b in last):
                return (Call(RULED_TOOL, {"query": f"{tag} required"}),)  # reminded, or failed
            return (f"skip {tag}",)
        if shape == "flood":  # parallel calls past the run's tool-call budget, then a reply
            if done < FLOOD_CALLS:
                return tuple(  # a window in the past: short answers, so the run's turn fits
                    Call(
                        "conversation_search",
                        {"query": f"{tag} flood {rng.randint(0, 10**9)}", **PAST},
                    )
                    for _ in range(FLOOD_BATCH)
                )
            return (f"done {tag}",)
        if shape == "beats":
            if done < int(probe.get("beats", 4)):
                args = {"query": f"{tag} {done}", "request_heartbeat": True}
                return (f"step {done} of {tag}", Call("conversation_search", args))
            return (Call("send_message", {"message": f"done {tag}"}),)
        return ("unknown shape",)


class LoopObserver:
    """Sees every model call: a rate-limited request must not be sent again (the same
    request, by the same call) before its ``retry-after``; a prompt must fit its agent's
    context window."""

    def __init__(self, log: LoopLog, now: Callable[[], float] = trio.current_time) -> None:
        self.log = log
        self.now = now
        self.refused: dict[int, tuple[LlmRequest, float, float]] = {}

    def observe(self, request: LlmRequest, outcome: Any, node: str | None) -> None:
        now = self.now()
        self.log.requests += 1
        earlier = self.refused.get(id(request))
        if earlier is not None and earlier[0] is request:
            self.log.retried += 1
            _, at, wait = earlier
            if now < at + wait - 1e-6:
                self.log.problem(
                    f"{node}: a request refused with 429 (retry-after {wait:g}s) at "
                    f"{at:.3f} was sent again {now - at:.3f}s later"
                )
        if isinstance(outcome, Failure) and outcome.kind == "rate_limited":
            self.log.rate_limited += 1
            self.refused[id(request)] = (request, now, outcome.retry_after or 0.0)
        self._attempt(request, outcome)
        if not is_summary_request(request):
            self._size(request)

    def _attempt(self, request: LlmRequest, outcome: Any) -> None:
        """Count the attempts of each request object (one call of the loop)."""
        log = self.log
        summary = is_summary_request(request)
        attempts = log.attempts.get(id(request))
        if attempts is None:
            found = None if summary else _input_of(request)
            tag = str(found[1].get("tag")) if found is not None else None
            attempts = log.attempts[id(request)] = Attempts(tag, summary)
            log.held.append(request)
        if isinstance(outcome, Failure):
            attempts.outcomes.append(outcome.kind)
        else:
            attempts.outcomes.append("cut" if getattr(outcome, "cut_after", None) else "ok")
        attempts.last = log.observed
        if summary:
            log.summaries.append(log.observed)
        log.observed += 1

    def _size(self, request: LlmRequest) -> None:
        agent = _agent_of(self.log, request)
        if agent is None:
            return
        tools = sum(
            len(json.dumps(dict(t.input_schema))) + len(t.description) for t in request.tools
        )
        room = (agent.context_window - agent.max_tokens) * 4
        if room - len(request.system) - tools < 4000:
            return  # the window is smaller than the floor the loop keeps for history
        history = 0
        for message in request.messages:
            for block in message.content:
                if isinstance(block, TextBlock):
                    history += len(block.text)
                elif isinstance(block, ToolResult):
                    history += len(block.content)
                else:
                    history += len(block.name) + len(block.arguments)
        size = len(request.system) + tools + history
        self.log.fill = max(self.log.fill, size * 1000 // room)
        if size > room + TOLERANCE:
            self.log.problem(
                f"a prompt of {agent.id} takes {size} characters (about {size // 4} tokens) "
                f"with max_tokens {agent.max_tokens}: over its context window of "
                f"{agent.context_window} tokens"
            )


def _piece(event: object) -> Piece | None:
    if isinstance(event, AssistantMessage):
        return Piece(event.id, event.message_type, event.content)
    if isinstance(event, ReasoningMessage):
        return Piece(event.id, event.message_type, event.reasoning)
    if isinstance(event, ToolCallMessage):
        call = event.tool_call
        return Piece(event.id, event.message_type, call.arguments or "", call.name)
    if isinstance(event, ToolReturnMessage):
        return Piece(event.id, event.message_type, event.tool_return, event.name)
    return None


class Driver:
    """One agent's client."""

    def __init__(self, client: Client, log: LoopLog, number: int, kind: str) -> None:
        self.client = client
        self.log = log
        self.number = number
        self.kind = kind
        self.rng = client.rng
        self.k = 0
        self.agent = ""

    async def make(self) -> None:
        n, kind = self.number, self.kind
        persona = f"I am loop agent {n}."
        if kind == "chat":
            persona += " " + " ".join(self.rng.choice(_WORDS) for _ in range(250))
        memgpt = kind == "memgpt"
        tools: tuple[str, ...] = ("conversation_search", "send_message") if memgpt else ()
        ids = tuple(builtin_id(t) for t in tools)
        if kind == "budget":
            ids = (builtin_id("conversation_search"),)
        if kind in ("letta", "bulky"):
            ids = (builtin_id("conversation_search"), *self.log.tool_ids.values())
        if kind == "flood":
            ids = (builtin_id("conversation_search"),)
        rules: tuple[ToolRule, ...] = ()
        if kind == "ruled":
            ids = (builtin_id(RULED_TOOL),)
            rules = (ToolRule(RULED_TOOL, "required_before_exit"),)
        window, max_tokens = {
            "letta": (32_000, LONG_MAX_TOKENS),
            "memgpt": (32_000, 1024),
            "chat": (CHAT_WINDOW, CHAT_MAX_TOKENS),
            "ruled": (32_000, 1024),
            "flood": (32_000, 8192),
            "budget": (32_000, 1024),
            "bulk": (32_000, 1024),
            "bulky": (BULKY_WINDOW, BULKY_MAX_TOKENS),
        }[kind]
        request = CreateAgent(
            name=f"loop-{n}",
            agent_type="memgpt_agent" if memgpt else "letta_v1_agent",
            memory_blocks=(BlockCreate("persona", persona, limit=5000),),
            tool_ids=ids,
            context_window=window,
            max_tokens=max_tokens,
            tool_rules=rules,
        )
        view = await self.client.until_done(lambda s: s.create_agent(request))
        self.agent = view.agent.id
        self.log.agents[n] = AgentInfo(n, self.agent, kind, window, max_tokens)

    def _probe(self) -> tuple[Send, str]:
        rng = self.rng
        self.k += 1
        shape = rng.choice(SHAPES[self.kind])
        tag = f"t{self.number}-{self.k}"
        probe: dict[str, Any] = {"shape": shape, "tag": tag}
        max_steps = 8
        marker = ""
        if shape == "long":
            probe["words"] = rng.randint(30, 50)
            marker = f"end-{tag}"
        elif shape == "chat":
            marker = f"end-{tag}"
        elif shape == "chain":
            max_steps = rng.randint(2, 5)
        elif shape == "beats":
            probe["beats"] = rng.randint(4, 6)
        elif shape == "thoughts":  # the nudge at the step budget's edge (no draw: the other
            max_steps = (8, 1, 2)[self.k % 3]  # shapes keep their seeds' choices)
        elif shape == "required":  # the reminder at the step budget's edge
            max_steps = (8, 1, 2, 3)[self.k % 4]
        elif shape == "desk":
            probe["refuse"] = rng.random() < 0.5
        elif shape == "spree":  # more calls than max_tool_calls (no draw: budget agents only)
            max_steps = 6  # past the budget: a mixed step, then refused ones to invalid_tool_call
        if shape == "blank":
            mode = "tokens"
        else:
            mode = rng.choice(
                ("send", "stream", "tokens") if self.kind != "memgpt" else ("send", "stream")
            )
        send = Send(self.agent, shape, tag, max_steps, mode, marker)
        return send, f"{PROBE} " + json.dumps(probe, sort_keys=True)

    async def send(self) -> None:
        send, text = self._probe()
        self.log.sends.append(send)
        # an otid makes the send safe to retry: a retry answers with the run the first try
        # started, resumed if a crash or a lost lease interrupted it
        inputs = (InputMessage("user", text, otid=f"otid-{send.tag}"),)
        result: TurnResult | None = None
        for attempt in range(RETRIES):
            try:
                if send.mode == "send" or attempt:
                    result = await self.client.once(
                        lambda s: s.send_message(self.agent, inputs, max_steps=send.max_steps)
                    )
                else:
                    result = await self._stream(send, inputs)
            except _FAILURES as error:
                send.failed = type(error).__name__
                await trio.sleep(self.rng.uniform(0.5, 2.0))
                continue
            except ServiceError as error:
                send.failed = type(error).__name__
                return
            if result is not None:
                break
        if result is None:
            return
        send.acked = True
        send.seen = self.log.observed
        send.run = result.run_id
        send.stop_reason = result.stop_reason
        send.steps = result.usage.step_count
        texts = [m.content for m in result.messages if isinstance(m, AssistantMessage)]
        send.reply = texts[-1] if texts else None

    async def _stream(self, send: Send, inputs: tuple[InputMessage, ...]) -> TurnResult | None:
        service: AgentService | None = self.client.service()
        if service is None:
            send.failed = "no node up"
            return None
        with trio.fail_after(60):
            async with service.stream_message(
                self.agent, inputs, max_steps=send.max_steps, stream_tokens=send.mode == "tokens"
            ) as stream:
                async for event in stream:
                    piece = _piece(event)
                    if piece is not None:
                        send.pieces.append(piece)
            if stream.result is None:  # it ended without an error, so it must have finished
                self.log.problem(
                    f"{self.agent} {send.tag}: the stream ended without an error but has no "
                    "result (a cut stream taken for a finished answer)"
                )
            return stream.result

    async def run(self, span: float) -> None:
        if self.kind == "bulk":  # an archive past one storage page (_agent_bulk)
            self.log.bulk += await bulk_archive(
                self.client, self.agent, OPTIONS.idle_timeout, self.log.problem
            )
            return
        deadline = trio.current_time() + span
        while trio.current_time() < deadline:
            await self.send()
            await trio.sleep(self.rng.uniform(0.1, 1.0))

    async def read_back(self) -> None:
        after: str | None = None
        by_run: dict[str, list[str]] = {}  # the history's message ids of each run, in order
        while True:
            cursor = after
            page = await self.client.until_done(
                lambda s: s.list_messages(self.agent, after=cursor, limit=100, order="asc")  # noqa: B023
            )
            for message in page:
                run_id = getattr(message, "run_id", None)
                if run_id:
                    by_run.setdefault(run_id, []).append(message.id)
                piece = _piece(message)
                if piece is not None:
                    status, call_id = None, None
                    if isinstance(message, ToolReturnMessage):
                        status, call_id = message.status, message.tool_call_id
                    elif isinstance(message, ToolCallMessage):
                        call_id = message.tool_call.tool_call_id
                    self.log.stored[piece.id] = Stored(
                        piece.id,
                        piece.kind,
                        piece.text,
                        piece.name,
                        status,
                        call_id,
                        run=message.run_id,
                        step=message.step_id,
                        agent=self.agent,
                    )
            if len(page) < 100:
                break
            after = page[-1].id
        runs = await self.client.until_done(
            lambda s: s.list_runs(agent_ids=[self.agent], limit=1000, order="asc")
        )
        self.log.runs.extend((r.id, r.status, r.stop_reason) for r in runs)
        for run_id, ids in by_run.items():  # a run's own view lists exactly its messages
            if len(ids) <= 100:  # the long ones: a view read in batches
                continue
            view = await self.client.until_done(
                lambda s: s.run_messages(run_id, limit=1000, order="asc")  # noqa: B023
            )
            listed = [m.id for m in view]
            if listed != ids:
                self.log.problem(
                    f"run {run_id}: its messages list {len(listed)} message(s), its history "
                    f"holds {len(ids)} (first difference at {_first_difference(listed, ids)})"
                )


def _first_difference(a: list[str], b: list[str]) -> int:
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


def _start_servers(
    ctx: WorkloadContext, log: LoopLog, db: kelpie_dst.Node
) -> dict[str, AgentService]:
    from kelpie_agent.service import open_agent_node

    topology = ctx.topology
    services: dict[str, AgentService] = {}
    timing = LlmTiming(ttft_min=0.05, ttft_max=0.3, tokens_per_second=400.0)
    desk = _desk()

    async def server(node: kelpie_dst.Node) -> None:
        llm = SimLlmClient(
            LoopPolicy(log),
            timing=timing,
            observer=LoopObserver(log),
            shape=StreamShape(blank_text=True),
        )
        config = McpServerConfig(DESK, "simulated", startup_timeout=10, call_timeout=10)
        async with (
            McpClient([config], transport=sim_mcp_transport(desk)) as mcp,
            open_agent_node(
                open_kv(node, host=db),
                sim_ports(node),
                node_id=node.name,
                llm=llm,
                mcp=mcp,
                loop_config=attrs.evolve(LOOP, max_tool_calls=log.max_tool_calls),
                dispatcher_options=OPTIONS,
                options=SERVICE,
                observer=kelpie_dst.log,
                **coherence_options(ctx, db),
            ) as service,
        ):
            services[node.name] = service
            await trio.sleep_forever()

    for name in topology.nodes or ("server-1", "server-2"):
        ctx.sim.add_node(name, server)
    return services


def _desk() -> SimMcpServer:
    """The MCP server of the ``desk`` shape: a lookup that echoes, and a tool whose every
    answer is an ``isError`` result in plain words."""
    tools = [
        {"name": LOOKUP, "description": "Look a text up.", "response": {"echo": "text"}},
        {
            "name": REFUSE,
            "description": "Ask the desk.",
            "input_schema": DESK_SCHEMA,
            "response": {"error": REFUSAL},
        },
    ]
    return SimMcpServer(DESK, tools, latency=(0.05, 0.2))


async def _register(ctx: WorkloadContext, log: LoopLog, db: kelpie_dst.Node) -> None:
    """The desk's tools, registered on the database directly (an operator's provisioning)."""
    main = ctx.sim.current_node()
    assert main is not None
    store = ToolStore(open_direct_kv(main, host=db), sim_ports(main))
    for name, description in ((LOOKUP, "Look a text up."), (REFUSE, "Ask the desk.")):
        spec = await store.add_mcp_tool(DESK, name, description, DESK_SCHEMA)
        log.tool_ids[name] = spec.id


@workload(
    params={
        "letta": 2,
        "memgpt": 1,
        "chat": 1,
        "ruled": 0,
        "flood": 0,
        "span": 60.0,
        "budget": 0,
        "bulk": 0,
        "bulky": 0,
        "max_tool_calls": LOOP.max_tool_calls,
    },
    bounds={
        "letta": (0, 20),
        "flood": (0, 20),
        "memgpt": (0, 20),
        "chat": (0, 20),
        "ruled": (0, 20),
        "span": (1, 3600),
        "budget": (0, 20),
        "bulk": (0, 5),
        "bulky": (0, 20),
        "max_tool_calls": (1, 1000),
    },
)
async def agent_loop(ctx: WorkloadContext) -> None:
    """The agent loop's shapes under faults; see the module docstring."""
    log = LoopLog(max_tool_calls=int(ctx.params["max_tool_calls"]))
    ctx.state["log"] = log
    db = ctx.sim.add_node(ctx.topology.database or "db")
    await _register(ctx, log, db)
    services = _start_servers(ctx, log, db)
    drivers: list[Driver] = []
    for kind in ("letta", "memgpt", "chat", "ruled", "flood", "budget", "bulk", "bulky"):
        for _ in range(int(ctx.params[kind])):
            n = len(drivers)
            drivers.append(Driver(Client(ctx, services, f"loop-{n}"), log, n, kind))
    for driver in drivers:
        await driver.make()
    span = float(ctx.params["span"])
    async with trio.open_nursery() as nursery:
        for driver in drivers:
            nursery.start_soon(driver.run, span)
    for driver in drivers:
        await driver.read_back()
    ctx.metric("loop.sends", len(log.sends))
    if log.bulk:
        ctx.metric("loop.bulk_passages", log.bulk)
    ctx.metric("loop.acked", sum(s.acked for s in log.sends))
    ctx.metric("loop.requests", log.requests)
    ctx.metric("loop.rate_limited", log.rate_limited)
    ctx.metric("loop.retried", log.retried)
    ctx.metric("loop.prompt_fill", log.fill)
    ctx.metric("loop.desk_refused", sum(m.name == REFUSE for m in log.stored.values()))
    ctx.metric(
        "loop.budget_refused",
        sum(m.status == "error" and BUDGET_REFUSED in m.text for m in log.stored.values()),
    )
    stops: dict[str, int] = {}
    for s in log.sends:
        if s.stop_reason:
            stops[s.stop_reason] = stops.get(s.stop_reason, 0) + 1
    for reason, count in sorted(stops.items()):
        ctx.metric(f"loop.stop.{reason}", count)


def _flood_refusal(call: Stored, result: Stored) -> bool:
    """A flood run's call refused for the run's budget (judged by check_call_budget)."""
    return " flood " in call.text and BUDGET_REFUSED in result.text


def check_call_budget(tags: list[str], stored: Mapping[str, Stored], budget: int) -> list[str]:
    """A run executes at most ``budget`` tool calls (``LoopConfig.max_tool_calls``): of a
    flood run's stored calls, in order, a call is refused for the budget exactly when
    ``budget`` calls before it ran (calls refused for another reason, such as a call a cut
    answer left unparsable, do not count)."""
    results = {m.call_id: m for m in stored.values() if m.kind == "tool_return_message"}
    problems: list[str] = []
    for tag in tags:
        ran = 0
        for call in (m for m in stored.values() if m.kind == "tool_call_message"):
            result = results.get(call.call_id)
            if f'"{tag} flood ' not in call.text or result is None:
                continue
            refusal = result.status == "error" and "invalid_tool_call:" in result.text
            if refusal and BUDGET_REFUSED not in result.text:
                continue
            if (ran < budget) == refusal:
                state = "refused" if refusal else f"ran ({result.status})"
                problems.append(
                    f"flood {tag}: a call {state} after {ran} calls of the run had run; the "
                    f"budget is {budget}"
                )
                break
            ran += 0 if refusal else 1
    return problems


def check_listed_statuses(runs: list[tuple[str, str, str | None]]) -> list[str]:
    """Each finished run the service lists has the status Letta gives its stop reason (the
    loop's own endings: ``invalid_tool_call``, ``no_tool_call``, ``invalid_llm_response`` and
    ``max_tokens_exceeded`` runs failed; ``end_turn`` and ``max_steps`` ones completed)."""
    problems = []
    for run_id, status, stop in runs:
        want = expected_status(stop) if stop is not None else None
        if want is not None and status != want:
            problems.append(f"run {run_id}: stop reason {stop} but listed {status} (want {want})")
    return problems


def check_loop(log: LoopLog) -> list[str]:
    problems = check_endings(
        log.sends,
        max_empty_responses=LOOP.max_empty_responses,
        no_tool_call_nudges=LOOP.no_tool_call_nudges,
    )
    problems += check_token_streams(log.sends, log.stored)
    problems += check_streams_stored(log.sends, log.stored)
    problems += check_mcp_verdicts(log.stored, REFUSE)
    budget = {a.id for a in log.agents.values() if a.kind == "budget"}  # refused on purpose
    problems += check_valid_calls_run(
        {k: m for k, m in log.stored.items() if m.agent not in budget}, exempt=_flood_refusal
    )
    problems += check_call_budget(
        [s.tag for s in log.sends if s.shape == "flood"], log.stored, log.max_tool_calls
    )
    problems += check_one_result_per_call(log.stored)
    problems += check_listed_statuses(log.runs)
    problems += check_tool_budget(log.stored, max_tool_calls=log.max_tool_calls)
    problems += check_invalid_streaks(
        log.stored, max_invalid_steps=LOOP.max_invalid_steps, sends=log.sends
    )
    problems += check_llm_attempts(
        log.sends, list(log.attempts.values()), log.summaries, llm_retries=LOOP.llm_retries
    )
    return problems + log.problems


@invariant
def loop_contract(ctx: WorkloadContext) -> None:
    """Endings, budgets, streams, the run's input, the context window and retry-after are
    what the loop's contract says; see :func:`check_loop`."""
    log: LoopLog = ctx.state["log"]
    problems = check_loop(log)
    shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if problems[4:] else "")
    assert not problems, shown
