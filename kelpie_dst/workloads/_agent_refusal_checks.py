"""What a refused or failed request changed is never seen: the pure checker of
``agent_refusals`` (``refusals_change_nothing``).

The workload's client changes one agent at a time, alone (no other client touches it), and
after every request, whatever its answer, reads the agent back at once through the node it
asked, before anything else touches the agent: the system prompt the agent's activation would
send next (``recompile``, dry run: its memory blocks and its tool-rules block, from the
activation's memory) and its archival passages (listed by the activation, from its memory).
Then it reads the database directly. Each :class:`Step` holds the stored state before and
after, the state the request's success would give (the client's model), and what the
activation showed. :func:`check_refusals` judges:

1. **A refused request changed nothing**: after a definite refusal (404, 409, 422) the stored
   agent is the one before it.
2. **A request changed exactly its own part**: after a success the stored agent is the one the
   client's model gives; after a failure whose outcome the client cannot know (503, a timeout)
   it is either the one before or that one.
3. **What the activation shows is what storage holds**, right after every request, refused,
   failed or not: the memory section of its prompt is the stored blocks (and the stored tool
   rules) rendered, and its passages are the stored ones. An activation that applied a change
   in memory before a write that then failed, or before a check that refused it, and kept
   serving from that memory, shows something storage never got (and its next write of the
   agent stores it: rule 2 catches that one).
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["Shape", "Step", "check_refusals"]

_MAX = 12


@attrs.frozen
class Shape:
    """An agent as stored: its record (``updated_at`` zeroed), its blocks' ``(label,
    value)`` in order, and its passages' texts (sorted)."""

    record: Any
    blocks: tuple[tuple[str, str], ...]
    passages: tuple[str, ...]


@attrs.frozen
class Step:
    agent: str
    op: str  # what the client asked ("attach_block scratch-2", ...)
    outcome: str  # "ok", "refused" (a definite refusal) or "failed" (outcome unknown)
    error: str  # the refusal's or the failure's text ("" after a success)
    before: Shape  # stored before the request
    expected: Shape  # stored after it, had it succeeded (the client's model)
    after: Shape  # stored right after the reads below
    memory: str  # the stored memory rendered as the prompt shows it (blocks + rules)
    prompt: str  # the prompt the activation compiled right after (dry run)
    passages: tuple[str, ...]  # the passages the activation listed right after (sorted)


def _diff(a: Shape, b: Shape) -> str:
    """Where two shapes differ, briefly."""
    parts = []
    if a.record != b.record:
        ra, rb = attrs.asdict(a.record, recurse=False), attrs.asdict(b.record, recurse=False)
        names = [n for n in ra if ra[n] != rb.get(n)]
        parts.append("record " + ", ".join(f"{n}: {ra[n]!r} -> {rb[n]!r}" for n in names[:3]))
    if a.blocks != b.blocks:
        parts.append(f"blocks {a.blocks!r} -> {b.blocks!r}")
    if a.passages != b.passages:
        parts.append(f"passages {list(a.passages)} -> {list(b.passages)}")
    return "; ".join(parts) or "equal"


def check_refusals(steps: list[Step]) -> list[str]:
    """The problems in ``steps`` (see the module docstring); empty when all held."""
    problems: list[str] = []
    for n, s in enumerate(steps):
        where = f"step {n} ({s.agent}: {s.op}, {s.outcome}{': ' + s.error if s.error else ''})"
        if s.outcome == "refused" and s.after != s.before:
            problems.append(
                f"{where}: a refused request changed the agent: {_diff(s.before, s.after)}"
            )
        elif s.outcome == "ok" and s.after != s.expected:
            problems.append(
                f"{where}: the stored agent is not what the request made: "
                f"expected vs stored: {_diff(s.expected, s.after)}"
            )
        elif s.outcome == "failed" and s.after not in (s.before, s.expected):
            problems.append(
                f"{where}: the stored agent is neither the one before nor the one after: "
                f"{_diff(s.before, s.after)}"
            )
        if s.memory not in s.prompt:
            problems.append(
                f"{where}: the activation's prompt does not show the stored memory "
                f"(stored blocks {s.after.blocks!r})"
            )
        if s.passages != s.after.passages:
            problems.append(
                f"{where}: the activation lists passages {list(s.passages)}, "
                f"storage holds {list(s.after.passages)}"
            )
        if len(problems) >= _MAX:
            break
    return problems
