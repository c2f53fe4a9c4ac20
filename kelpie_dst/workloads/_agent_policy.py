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
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.llm import LlmRequest, TextBlock, Tool, ToolCall, ToolResult

from ..shims import HelpfulPolicy, policy_from_dict
from ..shims.llm import Call, Policy, Reply
from ._agent_checks import tag

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

KINDS = ("chat", "memory", "archival", "conversation", "python", "shell", "custom", "mcp")
"""The tool kinds a workload's ``tools`` parameter may list."""

CUSTOM_TOOL = "tally"
CUSTOM_TOOL_SOURCE = '''
def tally(text: str, times: int = 2) -> str:
    """Repeat a text and count its words.

    Args:
        text: The text to repeat.
        times: How many times.
    """
    words = text.split()
    return " ".join([text] * times) + " (" + str(len(words) * times) + " words)"
'''
MCP_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to look up."}},
    "required": ["text"],
}
_DIRECTIVE = re.compile(
    r"^(?P<tag>tag-a(?P<agent>\d+)-m(?P<message>\d+)) (?P<kind>[a-z]+)"
    r"(?:/(?P<tool>[A-Za-z0-9_-]+))? x(?P<steps>\d+): (?P<words>.*)$",
    re.DOTALL,
)
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


@attrs.frozen
class ToolMixPolicy:
    """Follows the workload's directives; everything else goes to ``fallback``."""

    fallback: Policy = attrs.field(factory=HelpfulPolicy)

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
        offered = {t.name: t for t in request.tools}
        if steps < directive.steps:
            call = _call(directive, steps + 1, offered)
            if call is not None:
                return (call,)
        return _reply(directive, steps, _last_result(later), offered)


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


def _with_heartbeat(tool: Tool, args: dict[str, Any]) -> Call:
    if "request_heartbeat" in tool.input_schema.get("properties", {}):
        args["request_heartbeat"] = True
    return Call(tool.name, args)


def _call(d: Directive, step: int, offered: Mapping[str, Tool]) -> Call | None:
    """The tool call of ``step`` (1-based), or None if the agent lacks the tool."""
    note = f"{d.tag} step {step}"
    options: list[tuple[str, dict[str, Any]]] = []
    if d.kind == "memory":
        options = [
            ("core_memory_append", {"label": "human", "content": f"{note}."}),
            ("memory_insert", {"label": "human", "new_string": f"{note}."}),
        ]
    elif d.kind == "archival":
        if step % 2:
            options = [("archival_memory_insert", {"content": f"{note}: {d.words}"})]
        else:
            options = [("archival_memory_search", {"query": d.tag, "top_k": 3})]
    elif d.kind == "conversation":
        previous = tag(d.agent, max(1, d.message - step))
        options = [("conversation_search", {"query": previous, "limit": 3})]
    elif d.kind == "python":
        code = f"print({note!r}, {step} * 7)"
        options = [("run_code", {"code": code, "language": "python"})]
    elif d.kind == "shell":
        code = f"echo {note} && echo {d.words} | wc -w"
        options = [("run_code", {"code": code, "language": "shell"})]
    elif d.kind == "custom":
        options = [(CUSTOM_TOOL, {"text": note, "times": 2})]
    elif d.kind == "mcp" and d.tool:
        options = [(d.tool, {"text": note})]
    for name, args in options:
        if name in offered:
            return _with_heartbeat(offered[name], args)
    return None


def _reply(d: Directive, steps: int, result: str, offered: Mapping[str, Tool]) -> Reply:
    text = f"{d.tag} done after {steps} steps" + (f": {result}" if result else ".")
    if "send_message" in offered:
        return (Call("send_message", {"message": text}),)
    return (text,)


def workload_policy(policy: Mapping[str, Any]) -> Policy:
    """The model for a scenario's ``topology.llm``: ``helpful`` (also ``none``) is
    :class:`ToolMixPolicy`; ``scripted`` and ``adversarial`` are the scenario's policy."""
    mode = policy.get("mode", "none")
    if mode in ("none", "helpful"):
        return ToolMixPolicy()
    return policy_from_dict(policy)
