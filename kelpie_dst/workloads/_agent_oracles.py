"""Oracles at the agent workload's boundaries (design.md section 4).

They look where every bug must show, whichever line it is on, never inside the code under test:

* :class:`PromptAuditor` sees **every request the model gets** (an ``LlmObserver`` of the
  simulated LLM): each must name exactly one agent (every agent's memory carries its marker
  ``mark-aN-...``, every input its tag ``tag-aN-...``), show that agent's memory with values
  within their limits and its read-only blocks unchanged, and be one the real API accepts. It
  also keeps what the model really said, complete (not cut off mid-stream), so that stored
  messages can be checked against it, and checks the outcome of each boundary edit and junk
  call the model made against what any correct agent must answer.
* :class:`Ledger` is the **external service** the workload's tools with side effects call (the
  custom tool and Python code in the sandbox, the MCP tools), keyed by tool-call id (the call's
  ``request_id``), as a payments API is keyed by idempotency key. With the database journal it
  checks that every completed tool call took effect exactly once, across crashes, retries,
  recovery and handoffs.

The functions ``check_*`` here are pure, over what those objects recorded, so tests can plant
violations.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import attrs
import trio

from kelpie_agent.agent import BOOT_ARGUMENTS, BOOT_THOUGHT
from kelpie_agent.llm import LlmRequest, TextBlock, ToolCall, ToolResult

from ..shims.llm import Failure, Plan, is_summary_request
from ._agent_checks import Msg
from ._agent_compaction import ContextAuditor
from ._agent_moves import CUSTOM_TOOL, CUSTOM_TOOL_SOURCE, Expect
from ._agent_prompt import agents_marked, prompt_blocks
from ._agent_rules import check_offered
from ._agent_threads import ThreadAuditor
from ._tool_signatures import check_tool_schemas, signature_of_source

__all__ = [
    "Applied",
    "Ledger",
    "PromptAuditor",
    "Sent",
    "check_effects",
    "check_heartbeats",
    "check_model_said",
    "check_resends",
]

_MAX_PROBLEMS = 50


class PromptAuditor:
    """Checks each LLM request as it is made; ``problems`` collects what was wrong."""

    def __init__(self) -> None:
        self.problems: dict[str, list[str]] = {}  # by kind: isolation, memory, outcome, api
        self.requests = 0
        self.checked_outcomes = 0
        self.rule_checks = 0  # requests checked against the agent's tool rules
        self.texts: set[str] = set()  # text blocks of complete answers
        self.calls: set[tuple[str, str]] = set()  # (name, arguments) of complete answers
        self.call_ids: set[str] = set()
        # each call id of a complete answer -> the (name, arguments) the model gave it (session
        # 17, llmL: what later prompts show of the call, _prompt_history)
        self.call_args: dict[str, set[tuple[str, str]]] = {}
        # each call id of a complete answer -> every call id of that answer, in order
        self.siblings: dict[str, tuple[str, ...]] = {}
        self.markers: dict[int, str] = {}  # agent -> its persona marker
        self.read_only: dict[int, dict[str, str]] = {}  # agent -> label -> value
        self.max_counts: dict[int, dict[str, int]] = {}  # agent -> tool -> its rule's limit
        self.types: dict[int, str] = {}  # agent -> its agent_type
        self.expected: dict[str, Expect] = {}
        self.context = ContextAuditor()  # compaction: no input vanishes from the prompt
        self.threads = ThreadAuditor()  # conversations: one thread per prompt
        self.step_hooks: list[Callable[[LlmRequest, int, str], None]] = []  # more step checks
        # (``exempt_deposed``) agent, node -> another node holds that agent's lease now: the
        # step is a deposed activation's, which may run but never commit (docs/actors.md)
        self.deposed: Callable[[int, str | None], bool] | None = None
        self.deposed_steps = 0  # steps of deposed activations, not judged

    def _uncut(self, agents: set[int]) -> set[int]:
        """``agents`` less the numbers a cut shortened: an answer stopped at ``max_tokens``
        inside ``mark-a903`` leaves ``mark-a90``, which names no agent of the run but is the
        start of one the request names (rtU). A number of a known agent always counts."""
        known = set(self.markers) | set(self.types)
        return {
            n
            for n in agents
            if n in known or not any(m != n and str(m).startswith(str(n)) for m in agents)
        }

    def _problem(self, text: str, kind: str = "memory") -> None:
        found = self.problems.setdefault(kind, [])
        if len(found) < _MAX_PROBLEMS:
            found.append(text)

    def expect(self, expect: Expect) -> None:
        self.expected[expect.call_id] = expect

    # -- the LlmObserver hook ------------------------------------------------------------------
    def observe(self, request: LlmRequest, outcome: Plan | Failure, node: str | None) -> None:
        self.requests += 1
        where = f"t={trio.current_time():.3f} {node}"
        agents = agents_marked(request.system)
        booted = False  # the request shows a new agent's boot messages (they name no agent)
        for message in request.messages:
            for block in message.content:
                if isinstance(block, TextBlock):
                    agents |= agents_marked(block.text)
                    booted = booted or BOOT_THOUGHT in block.text
                    if MEMORY_SECTION in block.text:  # the stored system message as a turn
                        self._problem(f"{where}: a turn repeats the system prompt's memory")
                elif isinstance(block, ToolCall):
                    agents |= agents_marked(block.arguments)
                else:
                    agents |= agents_marked(block.content)
                    self._check_flag(block, where)
                    self._check_result(block, where, request.system)
        agents = self._uncut(agents)
        if len(agents) > 1:
            names = ", ".join(f"a{n}" for n in sorted(agents))
            self._problem(f"{where}: one LLM request shows the data of agents {names}", "isolation")
        elif not agents and booted and is_summary_request(request):
            pass  # a compaction of only an agent's boot messages: nothing of any agent's data
        elif not agents:
            self._problem(
                f"{where}: an LLM request shows no agent's memory or messages", "isolation"
            )
        elif is_summary_request(request):  # compaction: no memory in it, not a step
            self.context.summary(agents.pop())
        elif self.deposed is not None and self.deposed(next(iter(agents)), node):
            # A deposed activation's step (the timing assumption broken: a clock jump): its
            # prompt comes from the memory it had, and fencing keeps it from committing or
            # answering; what it was shown is not judged (Dlead19-2).
            self.deposed_steps += 1
        else:
            agent = agents.pop()
            self._check_memory(request.system, agent, where)
            limits = self.max_counts.get(agent, {})
            self.rule_checks += bool(limits)
            for problem in check_offered(request, agent, limits, where):
                self._problem(problem, "outcome")
            for problem in check_heartbeats(request, agent, self.types.get(agent), where):
                self._problem(problem, "api")
            shown = ((tool.name, tool.input_schema) for tool in request.tools)
            for problem in check_tool_schemas(shown, _CUSTOMS, where):
                self._problem(problem, "api")
            self.context.step(request, agent, where)
            self.threads.step(request, agent, where)
            for hook in self.step_hooks:
                hook(request, agent, where)
        if isinstance(outcome, Failure):
            if outcome.kind == "bad_request":
                self._problem(
                    f"{where}: the agent sent a request the API refuses: {outcome.message}", "api"
                )
            return
        self._said(outcome)

    def _check_memory(self, system: str, agent: int, where: str) -> None:
        blocks = prompt_blocks(system)
        if blocks is None:
            self._problem(f"{where}: a{agent}'s prompt has no memory section")
            return
        for block in blocks.values():
            if len(block.value) != block.chars_current or block.chars_current > block.chars_limit:
                self._problem(
                    f"{where}: a{agent}'s prompt shows block {block.label} with "
                    f"{len(block.value)} characters as chars_current={block.chars_current}, "
                    f"chars_limit={block.chars_limit}"
                )
        marker = self.markers.get(agent)
        if marker is not None and marker not in system:
            self._problem(f"{where}: a{agent}'s prompt lacks its own memory (marker {marker})")
        for label, value in sorted(self.read_only.get(agent, {}).items()):
            shown = blocks.get(label)
            if shown is None or shown.value != value or not shown.read_only:
                got = "missing" if shown is None else f"{shown.value[:60]!r}"
                if shown is not None and not shown.read_only:
                    got += " as a writable block"
                self._problem(
                    f"{where}: a{agent}'s read-only block {label} should be {value[:60]!r}, "
                    f"the prompt shows {got}"
                )

    def _check_flag(self, result: ToolResult, where: str) -> None:
        """A tool result is shown to the model as an error exactly when it says it failed
        (Letta's ``{"status": "OK"|"Failed", ...}``): the flag is what the API tells the
        model, and a failure it is not told of reads as a success."""
        status = tool_status(result.content)
        if status is not None and result.is_error != (status == "Failed"):
            flag = "with" if result.is_error else "without"
            self._problem(
                f"{where}: tool result {result.tool_call_id} says {status!r} but is shown "
                f"{flag} is_error",
                "api",
            )

    def _check_result(self, result: ToolResult, where: str, system: str) -> None:
        expect = self.expected.pop(result.tool_call_id, None)
        if expect is None:
            return
        self.checked_outcomes += 1
        failed = result.is_error or '"status": "Failed"' in result.content
        if expect.contains and not failed and expect.contains not in result.content:
            self._problem(
                f"{where}: a{expect.agent}'s {expect.name} call {expect.call_id} did not find "
                f"{expect.contains!r}, stored before it ran: {result.content[:160]}",
                "outcome",
            )
        elif expect.contains and failed:
            return  # a search may fail under faults; what it must find is for a success
        if failed == expect.ok:
            outcome = "failed" if failed else "succeeded"
            self._problem(
                f"{where}: a{expect.agent}'s {expect.name} call {expect.call_id} ({expect.why}) "
                f"{outcome}: {result.content[:160]}",
                "outcome",
            )
        elif expect.after is not None:  # the next step shows the block as the edit left it
            label, value = expect.after
            shown = (prompt_blocks(system) or {}).get(label)
            if shown is not None and shown.value != value:
                self._problem(
                    f"{where}: after a{expect.agent}'s {expect.name} call {expect.call_id} "
                    f"({expect.why}) the prompt shows {label} as {shown.value[:80]!r}, "
                    f"not {value[:80]!r}",
                    "outcome",
                )

    def _said(self, plan: Plan) -> None:
        for block in plan.response.content:
            if isinstance(block, ToolCall):
                expect = self.expected.get(block.id)
                if expect is not None and (block.name, block.arguments) != (
                    expect.name,
                    expect.arguments,
                ):
                    del self.expected[block.id]  # a fault changed the call: no expectation
        if plan.cut_after is not None:
            return  # a stream that breaks never delivers a complete answer
        ids = tuple(b.id for b in plan.response.content if isinstance(b, ToolCall))
        for block in plan.response.content:
            if isinstance(block, TextBlock):
                self.texts.add(block.text)
            else:
                self.calls.add((block.name, block.arguments))
                self.call_ids.add(block.id)
                self.call_args.setdefault(block.id, set()).add((block.name, block.arguments))
                self.siblings[block.id] = ids


MEMORY_SECTION = "<memory_blocks>"
_CUSTOMS = {CUSTOM_TOOL: signature_of_source(CUSTOM_TOOL_SOURCE, CUSTOM_TOOL)}


def check_heartbeats(
    request: LlmRequest, agent: int, agent_type: str | None, where: str
) -> list[str]:
    """Letta adds ``request_heartbeat`` to the tools of memgpt agents only: a letta_v1 or react
    agent whose model is shown it is asked for an argument its loop ignores (and a model that
    leaves out a required argument gets its valid call refused)."""
    if agent_type is None or agent_type == "memgpt_agent":
        return []
    return [
        f"{where}: a{agent} ({agent_type}) was offered {tool.name} with request_heartbeat, "
        "which Letta gives memgpt agents' tools only"
        for tool in request.tools
        if "request_heartbeat" in tool.input_schema.get("properties", {})
    ]


def _booted(m: Msg) -> bool:
    """One of a new agent's boot messages (outside any run; ``check_initial`` checks them)."""
    return m.run_id is None and m.text in (BOOT_THOUGHT, BOOT_ARGUMENTS)


def check_model_said(
    histories: Mapping[str, Sequence[Msg]], texts: set[str], calls: set[tuple[str, str]]
) -> list[str]:
    """Every stored message the model wrote is part of an answer the model completed (a stream
    cut off midway must never be stored as if it were the answer)."""
    problems = []
    for agent, history in histories.items():
        for m in history:
            if _booted(m):
                continue
            if m.type in ("assistant_message", "reasoning_message"):
                if m.text not in texts:
                    problems.append(
                        f"{agent}: stored {m.type} {m.id} {m.text[:80]!r} is not what the model "
                        "said in any complete answer"
                    )
            elif m.type == "tool_call_message" and (m.tool or "", m.text) not in calls:
                problems.append(
                    f"{agent}: stored tool call {m.id} {m.tool}({m.text[:80]}) is not a call the "
                    "model made in any complete answer"
                )
    return problems


# -- the external service ----------------------------------------------------------------------


@attrs.frozen
class Applied:
    """One call to the external service: at journal position ``at``."""

    at: int
    time: float
    key: str
    note: str
    via: str


@attrs.frozen
class Sent:
    """An MCP call with a ``request_id`` that ``activation`` sent, as the send ended: answered
    (or failed), or ``timed_out``: its outcome is unknown (the client gave up waiting, or the
    server died holding it); ``started``/``ended`` are the virtual times of the send (the
    effects applied in between are its own)."""

    activation: str
    key: str
    tool: str
    timed_out: bool
    started: float = 0.0
    ended: float = float("inf")


def check_resends(sent: Iterable[Sent], applied: Iterable[Applied]) -> list[str]:
    """An MCP call that timed out, or whose server died holding it, may have taken effect
    (only its answer was lost), so the activation that sent it must not send it again: the
    error is the call's result. A resend by the same activation that made the effect happen
    twice is a bug. (Sends of one call by different activations are recovery, judged by
    check_effects against the commits.) Only such a send that itself took effect, followed by
    a resend of the same activation that took effect again, is a double: a resend after a send
    whose tool never ran (the server hung, or died, before running it) repeats nothing, and
    the effects of other activations' sends are not this activation's. And one send takes
    effect at most once: a client that resends inside a call (after a break) is seen there."""
    effects = [a for a in applied if a.via.startswith("mcp:")]
    times = Counter(a.key for a in effects)

    def took_effect(s: Sent) -> bool:
        return any(a.key == s.key and s.started <= a.time <= s.ended for a in effects)

    problems: list[str] = []
    sends = list(sent)
    timed_out: set[tuple[str, str]] = set()
    for s in sends:
        # One send runs its call once: two effects inside it, while no other send of that call
        # was in flight, are a resend hidden inside the client (after a break, say).
        own = [a for a in effects if a.key == s.key and s.started <= a.time <= s.ended]
        alone = not any(
            o is not s and o.key == s.key and o.started <= s.ended and s.started <= o.ended
            for o in sends
        )
        if len(own) > 1 and alone:
            problems.append(
                f"mcp:{s.tool}: one send of call {s.key} by {s.activation} took effect "
                f"{len(own)} times"
            )
        if (s.activation, s.key) in timed_out and took_effect(s):
            problems.append(
                f"mcp:{s.tool}: call {s.key} may have run (it timed out or its server died) "
                f"and {s.activation} sent it again: "
                f"its effect happened {times[s.key]} times"
            )
        if s.timed_out and took_effect(s):
            timed_out.add((s.activation, s.key))
    return problems


class Ledger:
    """The simulated external service: applies each key's effect once (it dedups, as any
    idempotent API does), and records every call it got."""

    def __init__(self, position: Callable[[], int]) -> None:
        self._position = position
        self.applied: list[Applied] = []
        self.effects: dict[str, str] = {}  # key -> note, the first time it was applied
        self.calls: dict[str, tuple[str, bool]] = {}  # effect calls the model made: note, forbidden

    def register(self, key: str, note: str, forbidden: bool) -> None:
        self.calls[key] = (note, forbidden)

    def apply(self, key: str, note: str, via: str) -> str:
        self.applied.append(Applied(self._position(), trio.current_time(), key, note, via))
        if key in self.effects:
            return "already applied"
        self.effects[key] = note
        return "applied"


def check_effects(
    applied: Iterable[Applied],
    calls: Mapping[str, tuple[str, bool]],
    returns: Mapping[str, tuple[int, str]],
    planned: Collection[str] = (),
) -> list[str]:
    """``calls``: the effect calls the model made in complete answers (key -> note,
    forbidden); ``returns``: the tool results committed to the database (call id -> first
    journal position, status); ``planned``: every key the model chose, complete answer or
    not (default: those of ``calls``). An effect under a key no workload move chose (another
    policy's arguments) is not the workload's to judge."""
    problems: list[str] = []
    keys_of: dict[str, set[str]] = {}
    done: set[str] = set()
    planned = set(planned) | set(calls)
    for a in applied:
        if a.key not in planned:
            continue
        keys_of.setdefault(a.note, set()).add(a.key)
        done.add(a.key)
        made = calls.get(a.key)
        if made is None:
            problems.append(
                f"{a.via}: {a.note!r} took effect under {a.key}, a call the model never completed"
            )
        elif made[1]:
            problems.append(f"{a.via}: {a.note!r} ran although the call {a.key} must be refused")
        stored = returns.get(a.key)
        if stored is not None and stored[0] < a.at:
            problems.append(
                f"{a.via}: {a.note!r} ({a.key}) ran again at t={a.time:.3f} after its result was "
                f"committed (journal entry {stored[0]} < {a.at})"
            )
    for note, keys in sorted(keys_of.items()):
        if len(keys) > 1:
            problems.append(
                f"{note!r} took effect {len(keys)} times, under {', '.join(sorted(keys))}"
            )
    for key, (note, forbidden) in sorted(calls.items()):
        stored = returns.get(key)
        if stored is not None and stored[1] == "success" and not forbidden and key not in done:
            problems.append(f"{note!r} ({key}) reported success but never took effect")
    return problems


def tool_status(content: str) -> str | None:
    """The ``status`` of a Letta tool result (``"OK"`` or ``"Failed"``), or ``None`` when the
    content is not one."""
    if not content.startswith("{"):
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    status = value.get("status") if isinstance(value, dict) else None
    return status if status in ("OK", "Failed") else None
