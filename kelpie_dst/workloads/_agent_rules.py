"""Tool rules in the agent workload: which agents get them, how the model reads them, and the
oracle that checks what the model is offered against them.

With ``workload.params.tool_rules`` (a fraction of the agents), some agents are created with
Letta ``max_count_per_step`` rules on tools their directives call step after step (the custom
tool, an MCP tool, Python, archival inserts, memory appends). Letta's semantics: once a run has
called the tool ``max_count_limit`` times, the tool is no longer offered to the model in that
run, and a call of it is refused.

The simulated model reads the rules as a real one does, from the ``tool_usage_rules`` block of
its system prompt, and now and then calls a tool the rules have hidden anyway (models do):
that call must fail (an :class:`~._agent_moves.Expect` the prompt oracle checks).

:func:`check_offered` is the oracle at the model's boundary: a request may not offer a tool
that this run has already called successfully as often as the agent's rule allows. It knows
the rules from the plan (not from the prompt), and counts only the successful calls whose
arguments carry the current directive's tag, so it can undercount (never flag a correct
agent) but not overcount, even when compaction or a retry shows older runs' calls.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence

from kelpie_agent.llm import LlmRequest, TextBlock, ToolCall, ToolResult

from ._agent_prompt import prompt_blocks

__all__ = [
    "RULED_TOOLS",
    "check_offered",
    "draw_max_counts",
    "prompt_max_counts",
    "ruled_candidates",
    "run_calls",
]

RULED_TOOLS = (
    "tally",
    "run_code",
    "archival_memory_insert",
    "core_memory_append",
    "memory_insert",
)
"""Tools a directive calls once per step, step after step (and the MCP tools)."""
_RULE_LINE = re.compile(r"^(?P<tool>[A-Za-z0-9_-]+): at most (?P<n>\d+) use\(s\) per response$")
_TAG = re.compile(r"^(tag-a\d+-m\d+) [a-z]+")


def draw_max_counts(
    rng: random.Random, fraction: float, tools: Sequence[str]
) -> tuple[tuple[str, int], ...]:
    """For one agent: with probability ``fraction``, ``max_count_per_step`` limits (1 or 2)
    on one or two of ``tools`` (its ruled-tool candidates, in a stable order)."""
    if fraction <= 0 or not tools or rng.random() >= fraction:
        return ()
    chosen = rng.sample(list(tools), min(len(tools), rng.randint(1, 2)))
    return tuple((name, rng.randint(1, 2)) for name in sorted(chosen))


def prompt_max_counts(system: str) -> dict[str, int]:
    """The ``max_count_per_step`` limits the ``tool_usage_rules`` block of a prompt shows."""
    blocks = prompt_blocks(system) or {}
    rules = blocks.get("tool_usage_rules")
    if rules is None:
        return {}
    found = {}
    for line in rules.value.split("\n"):
        m = _RULE_LINE.match(line.strip())
        if m is not None:
            found[m["tool"]] = int(m["n"])
    return found


def _current_tag(request: LlmRequest) -> tuple[int, str] | None:
    """The position and tag of the last directive (the input of the run being stepped)."""
    for position in range(len(request.messages) - 1, -1, -1):
        message = request.messages[position]
        if message.role != "user":
            continue
        for block in message.content:
            if isinstance(block, TextBlock):
                m = _TAG.match(block.text.strip())
                if m is not None:
                    return position, m.group(1)
    return None


def run_calls(request: LlmRequest) -> dict[str, int]:
    """Successful calls per tool in the run being stepped, as far as the request shows: the
    calls after the last directive whose arguments carry its tag and whose result is not an
    error (an undercount at worst)."""
    found = _current_tag(request)
    if found is None:
        return {}
    position, tag = found
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for message in request.messages[position + 1 :]:
        for block in message.content:
            if isinstance(block, ToolCall) and tag in block.arguments:
                names[block.id] = block.name
            elif isinstance(block, ToolResult) and block.tool_call_id in names:
                failed = block.is_error or '"status": "Failed"' in block.content
                if not failed:
                    name = names[block.tool_call_id]
                    counts[name] = counts.get(name, 0) + 1
    return counts


def check_offered(
    request: LlmRequest, agent: int, limits: Mapping[str, int], where: str
) -> list[str]:
    """The tools of ``request`` that the agent's ``max_count_per_step`` rules forbid: a tool
    this run already called successfully ``limit`` times must not be offered again."""
    if not limits:
        return []
    counts = run_calls(request)
    offered = {t.name for t in request.tools}
    return [
        f"{where}: a{agent}'s model was offered {name} after {counts.get(name, 0)} successful "
        f"call(s) in this run (max_count_per_step {limit})"
        for name, limit in sorted(limits.items())
        if name in offered and counts.get(name, 0) >= limit
    ]


def ruled_candidates(tool_names: Iterable[str], mcp_tools: Sequence[str]) -> list[str]:
    """The agent's tools that may get a rule, in a stable order."""
    have = set(tool_names)
    return [n for n in (*RULED_TOOLS, *mcp_tools) if n in have]
