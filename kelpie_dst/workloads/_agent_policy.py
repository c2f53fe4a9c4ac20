"""What the agent workload says and what its simulated model answers.

Each input is a *directive* ``tag-a<agent>-m<message> <kind>[/<tool>] x<steps>: <words>``:
the model runs ``steps`` steps of the tool ``kind`` (one call per step, with arguments that
carry the tag), then replies with the tag and the last result. :class:`ToolMixPolicy` (the
``helpful`` mode of the workload) reads the directive from the conversation, so a run resumed
after a crash continues where it was; anything that is not a directive goes to
:class:`~kelpie_dst.shims.HelpfulPolicy`. The ``scripted`` and ``adversarial`` modes use the
scenario's policy as it is.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.llm import LlmRequest, TextBlock, ToolCall, ToolResult

from ..shims import HelpfulPolicy, policy_from_dict
from ..shims.llm import Call, Policy, Reply
from ._agent_checks import tag
from ._agent_moves import CUSTOM_TOOL, CUSTOM_TOOL_SOURCE, Expect, Moves
from ._agent_rules import prompt_max_counts, run_calls
from ._agent_shapes import reply_with_edit, shaped_calls

__all__ = [
    "CUSTOM_TOOL",
    "CUSTOM_TOOL_SOURCE",
    "KINDS",
    "MCP_SCHEMA",
    "Directive",
    "ToolMixPolicy",
    "directive_text",
    "parse_directive",
    "tool_kind",
    "workload_policy",
]

KINDS = (
    "chat",
    "memory",
    "archival",
    "conversation",
    "python",
    "shell",
    "custom",
    "mcp",
    "parallel",
    "edge",
    "junk",
    "recall",
)
"""The tool kinds a workload's ``tools`` parameter may list (``_agent_moves`` has the last four)."""

MCP_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to look up."},
        "request_id": {"type": "string", "description": "The idempotency key of this call."},
    },
    "required": ["text"],
}
_DIRECTIVE = re.compile(
    r"^(?P<tag>tag-a(?P<agent>\d+)-m(?P<message>\d+)) (?P<kind>[a-z]+)"
    r"(?:/(?P<tool>[A-Za-z0-9_-]+))? x(?P<steps>\d+): (?P<words>.*)$",
    re.DOTALL,
)
ESCAPES = '\n"quoted" back\\slash\ttab \u0007bell caf\u00e9 \u6d77 \U0001f9a6 \u2028end'
"""What every reply ends with under ``stream_escapes``: each kind of JSON escape (a newline,
a quote, a backslash, a tab, a control character) and non-ASCII text, one character outside
the BMP (a surrogate pair once ASCII-escaped) and U+2028."""
_WORDS = ("kelp", "tide", "otter", "reef", "current", "shell", "urchin", "sea", "drift", "foam")


@attrs.frozen
class Directive:
    tag: str
    agent: int
    message: int
    kind: str
    steps: int
    words: str
    tool: str | None = None


def directive_text(
    agent: int, message: int, kind: str, steps: int, rng: random.Random, tool: str | None = None
) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 5)))
    name = f"/{tool}" if tool else ""
    return f"{tag(agent, message)} {kind}{name} x{steps}: {words}"


def parse_directive(text: str) -> Directive | None:
    m = _DIRECTIVE.match(text.strip())
    if m is None:
        return None
    return Directive(
        m["tag"],
        int(m["agent"]),
        int(m["message"]),
        m["kind"],
        int(m["steps"]),
        m["words"],
        m["tool"],
    )


_KIND_OF_TOOL = {
    "core_memory_append": "memory",
    "core_memory_replace": "memory",
    "memory_insert": "memory",
    "memory_replace": "memory",
    "memory_rethink": "memory",
    "memory_finish_edits": "memory",
    "archival_memory_insert": "archival",
    "archival_memory_search": "archival",
    "conversation_search": "conversation",
    "conversation_search_date": "conversation",
    "run_code": "sandbox",
    "send_message": "send_message",
    "pause_heartbeats": "control",
    CUSTOM_TOOL: "custom",
}


def tool_kind(name: str | None, mcp_tools: Sequence[str] = ()) -> str:
    """The metric bucket of a tool call (``tools.<kind>``)."""
    if name in mcp_tools:
        return "mcp"
    return _KIND_OF_TOOL.get(name or "", "other")


def _last_directive(messages: Sequence[Any]) -> tuple[int, Directive] | None:
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role != "user":
            continue
        for block in message.content:
            if isinstance(block, TextBlock):
                directive = parse_directive(block.text)
                if directive is not None:
                    return position, directive
    return None


def _last_result(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        results = [b for b in message.content if isinstance(b, ToolResult)]
        if results:
            try:
                packaged = json.loads(results[-1].content)
            except ValueError:
                return results[-1].content[:80]
            text = packaged.get("message") if isinstance(packaged, dict) else None
            return str(text if text is not None else results[-1].content)[:80]
    return ""


def _ignore_expect(expect: Expect) -> None:
    return None


def _ignore_effect(call_id: str, note: str, forbidden: bool) -> None:
    return None


@attrs.frozen
class ToolMixPolicy:
    """Follows the workload's directives; everything else goes to ``fallback``.

    ``expect`` receives the outcome a correct agent must give each boundary or junk call, and
    ``effect`` each call with a side effect (its id, its note, and whether it must never run):
    the oracles in ``_agent_oracles`` check both."""

    fallback: Policy = attrs.field(factory=HelpfulPolicy)
    escapes: bool = False  # replies end with ESCAPES (stream_escapes)
    shapes: bool = False  # a real model's step shapes (step_shapes; _agent_shapes)
    expect: Callable[[Expect], None] = attrs.field(default=_ignore_expect, eq=False)
    effect: Callable[[str, str, bool], None] = attrs.field(default=_ignore_effect, eq=False)

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        found = _last_directive(request.messages)
        if found is None:
            return self.fallback.respond(request, rng)
        position, directive = found
        later = request.messages[position + 1 :]
        steps = sum(
            1
            for m in later
            if m.role == "assistant"
            and any(isinstance(b, ToolCall) and b.name != "send_message" for b in m.content)
        )
        moves = Moves(request, rng, self.expect, self.effect)
        moves.run = later
        if steps < directive.steps:
            calls = None
            if self.shapes:
                d = directive
                calls = shaped_calls(
                    d.kind, d.tag, d.agent, d.message, steps + 1, moves, later, d.words, d.tool
                )
            calls = _calls(directive, steps + 1, moves) if calls is None else calls
            if calls:
                return tuple(calls)
        reply = _reply(directive, steps, _last_result(later), moves, self.escapes)
        if self.shapes and isinstance(reply[-1], Call) and moves.rng.random() < 0.5:
            return tuple(reply_with_edit(moves, directive.tag, steps + 1, reply[-1]))
        return reply


def _calls(d: Directive, step: int, moves: Moves) -> list[Call]:
    """The tool calls of ``step`` (1-based); empty if the agent lacks the tools."""
    note = f"{d.tag} step {step}"
    offered = moves.offered
    if d.kind == "parallel":
        return moves.parallel(d.tag, step, d.words, (d.tool,) if d.tool else ())
    if d.kind == "edge":
        edit = moves.edge(d.agent, d.tag)
        return [edit] if edit is not None else []
    if d.kind == "junk":
        return [moves.junk(d.agent, d.tag, step)]
    options: list[tuple[str, dict[str, Any], bool]] = []
    if d.kind == "python":
        if "run_code" in offered:
            return [moves.python(note, step)]
        return _disobey(d, moves, [("run_code", {"note": note}, False)])
    if d.kind == "memory":
        # a model that can memory_replace also tidies its scratch block between notes
        if "memory_replace" in offered and step > 1 and moves.rng.random() < 0.5:
            edit = moves.edge(d.agent, d.tag)
            if edit is not None:
                return [edit]
        options = [
            ("core_memory_append", {"label": "human", "content": f"{note}."}, False),
            ("memory_insert", {"label": "human", "new_string": f"{note}."}, False),
        ]
    elif d.kind == "archival":
        if step % 2:
            insert: dict[str, Any] = {"content": f"{note}: {d.words}", "tags": [d.tag]}
            options = [("archival_memory_insert", insert, False)]
        elif "archival_memory_search" in offered:  # must find what this run inserted
            inserted = f"{d.tag} step {step - 1}"
            found = inserted if moves.stored(inserted, "archival_memory_insert") else ""
            query: dict[str, Any] = {"query": d.tag, "tags": [d.tag], "top_k": 3}
            return [moves.search(d.agent, "archival_memory_search", query, found)]
    elif d.kind == "conversation" and "conversation_search" in offered:
        previous = tag(d.agent, max(1, d.message - step))
        found = previous if d.message - step >= 1 and moves.stored(previous) else ""
        search: dict[str, Any] = {"query": previous, "limit": 3}
        return [moves.search(d.agent, "conversation_search", search, found)]
    elif d.kind == "shell":
        code = f"echo {note} && echo {d.words} | wc -w"
        options = [("run_code", {"code": code, "language": "shell"}, False)]
    elif d.kind == "custom":
        options = [(CUSTOM_TOOL, {"text": note, "times": 2}, True)]
    elif d.kind == "mcp" and d.tool:
        options = [(d.tool, {"text": note}, True)]
    limits = prompt_max_counts(moves.request.system) if options else {}
    for name, args, effect in options:
        if name in offered:
            if name in limits and moves.rng.random() < 0.3:
                return _burst(d, moves, name, args, effect, limits[name], note)
            return [moves.call(name, args, key=effect)]
    return _disobey(d, moves, options)


def _burst(
    d: Directive, moves: Moves, name: str, args: dict[str, Any], key: bool, limit: int, note: str
) -> list[Call]:
    """One step calling ``name`` once more than its rule has left (``limit`` minus the run's
    successful calls the model can see, so at least the last call is one too many): the last
    must be refused."""
    used = run_calls(moves.request).get(name, 0)
    calls: list[Call] = []
    count = max(1, limit - used + 1)
    for j in range(1, count + 1):
        mine = {
            k: v.replace(note, f"{note}.{j}") if isinstance(v, str) else v for k, v in args.items()
        }
        if j < count:
            calls.append(moves.call(name, mine, key=key))
        else:
            calls.append(moves.hidden(d.agent, name, mine, key=key))
    return calls


def _disobey(
    d: Directive, moves: Moves, options: list[tuple[str, dict[str, Any], bool]]
) -> list[Call]:
    """None of ``options`` is offered: if the prompt's tool rules say one was used up, call
    it anyway half the time (it must be refused); otherwise no call."""
    limits = prompt_max_counts(moves.request.system)
    for name, args, effect in options:
        if name in limits and moves.rng.random() < 0.5:
            return [moves.hidden(d.agent, name, args, key=effect)]
    return []


def _reply(d: Directive, steps: int, result: str, moves: Moves, escapes: bool = False) -> Reply:
    text = f"{d.tag} done after {steps} steps" + (f": {result}" if result else ".")
    if d.kind == "recall":
        text = f"{d.tag} done: {moves.recall()}"
    if escapes:
        text += ESCAPES
    if "send_message" in moves.offered:
        return (Call("send_message", {"message": text}),)
    return (text,)


def workload_policy(
    policy: Mapping[str, Any],
    *,
    expect: Callable[[Expect], None] = _ignore_expect,
    effect: Callable[[str, str, bool], None] = _ignore_effect,
    escapes: bool = False,
    shapes: bool = False,
) -> Policy:
    """The model for a scenario's ``topology.llm``: ``helpful`` (also ``none``) is
    :class:`ToolMixPolicy` (reporting to the oracles through ``expect`` and ``effect``);
    ``scripted`` and ``adversarial`` are the scenario's policy."""
    mode = policy.get("mode", "none")
    if mode in ("none", "helpful"):
        return ToolMixPolicy(expect=expect, effect=effect, escapes=escapes, shapes=shapes)
    return policy_from_dict(policy)
