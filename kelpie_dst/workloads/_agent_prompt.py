"""Reading an agent's memory back out of the system prompt it sent to the LLM.

The agent renders its blocks in Letta's ``<memory_blocks>`` format (``kelpie_agent.agent``'s
``render_memory``): for each block, ``<label>``, a description, ``chars_current``,
``chars_limit`` and ``read_only`` metadata, and the value between ``<value>`` lines. The
simulated model reads its memory this way (so what the prompt holds changes what it does), and
the prompt oracle checks what the model was shown against the limits and the read-only
values the workload set.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["PromptBlock", "agents_marked", "agents_named", "prompt_blocks"]

_BLOCK = re.compile(
    r"<(?P<label>[A-Za-z0-9_-]+)>\n<description>\n(?P<description>.*?)\n</description>\n"
    r"<metadata>\n- chars_current=(?P<current>-?\d+)\n- chars_limit=(?P<limit>-?\d+)\n"
    r"- read_only=(?P<read_only>true|false)\n</metadata>\n<value>\n(?P<value>.*?)\n</value>\n"
    r"</(?P=label)>\n",
    re.DOTALL,
)
_SECTION = re.compile(r"<memory_blocks>\n(.*?)</memory_blocks>", re.DOTALL)
AGENT_MARK = re.compile(r"\b(?:tag|mark)-a(\d+)\b")
"""Every workload text that belongs to agent N says ``tag-aN-...`` or ``mark-aN-...``."""
WHOLE_MARK = re.compile(r"\b(?:tag|mark)-a(\d+)(?=[-\s).,:;])")
"""A marker or tag whose number is followed by what every workload text puts after one (a dash,
a space, a closing parenthesis or punctuation): never the end of a text, a quote or an escape,
which is where a cut leaves a marker's first digits (``mark-a903`` cut to ``mark-a9``)."""


@attrs.frozen
class PromptBlock:
    label: str
    value: str
    chars_current: int
    chars_limit: int
    read_only: bool


def prompt_blocks(system: str) -> dict[str, PromptBlock] | None:
    """The memory blocks in a system prompt, by label (None if it has no memory section)."""
    section = _SECTION.search(system)
    if section is None:
        return None
    blocks = {}
    for m in _BLOCK.finditer(section.group(1)):
        blocks[m["label"]] = PromptBlock(
            m["label"], m["value"], int(m["current"]), int(m["limit"]), m["read_only"] == "true"
        )
    return blocks


def agents_named(text: str) -> set[int]:
    """The agent numbers a text mentions (``tag-aN`` / ``mark-aN``)."""
    return {int(n) for n in AGENT_MARK.findall(text)}


def agents_marked(text: str) -> set[int]:
    """The agent numbers a text names by whole markers (:data:`WHOLE_MARK`).

    The LLM auditor reads prompts with this: a tool call cut by ``max_tokens`` keeps the first
    digits of a marker at the end of its arguments, and the loop's refusal quotes them back
    (``'...(mark-a9'``), which :func:`agents_named` would read as agent 9's (Dlead24-1). The
    simulated model keeps :func:`agents_named`, the cautious reading, when it avoids text that
    could name another agent (its draws are part of every trace).
    """
    return {int(n) for n in WHOLE_MARK.findall(text)}


def prompt_labels(system: str) -> list[str] | None:
    """The labels of the memory blocks in a system prompt, in order and with repeats (None if
    it has no memory section): :func:`prompt_blocks` keeps one block per label."""
    section = _SECTION.search(system)
    if section is None:
        return None
    return [m["label"] for m in _BLOCK.finditer(section.group(1))]
