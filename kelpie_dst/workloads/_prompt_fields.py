"""What the model is told about each memory block is what storage holds (session 17, llmL).

The fresh-prompt oracle (:mod:`._agent_fresh`) judges each block's *value* in a prompt against
the database when the model is called. The prompt tells the model more about each block
(``render_memory``, Letta's format): its description, its ``chars_limit`` and whether it is
``read_only``. Those are what the model plans its edits by: a limit shown too high makes it
write edits that are refused, one shown too low makes it cut what it keeps, a writable block
shown read-only is never edited, a description from another block misleads it. So at every
model call, for every block the prompt shows that the database holds for the agent (by label),
**the description, the limit and the read-only flag shown are the stored ones**
(:func:`check_block_fields`), and ``chars_current`` is the length of the value shown (the
auditor's own check, repeated here for the blocks it does not judge).

Pure: it reads the prompt and the database host's store (no request, no draw), from the
fresh-prompt step hook, so it moves no seed. ``tool_usage_rules`` (compiled from the rules for
each prompt, never stored) is skipped unless a block with that label is stored.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kelpie_agent.agent import Keys
from kelpie_agent.agent._codec import unpack

from ..shims._storage import SimKVStore
from ._agent_prompt import _BLOCK, _SECTION

__all__ = ["BlockFields", "check_block_fields", "shown_fields", "stored_fields"]


@attrs.frozen
class BlockFields:
    """What a prompt says about a block, or what storage holds for it."""

    description: str
    limit: int
    read_only: bool
    chars: int | None = None  # chars_current as shown (None: a stored record)
    value: str | None = None


def shown_fields(system: str) -> dict[str, BlockFields] | None:
    """label -> what the prompt's ``<memory_blocks>`` says of each block (None: no section)."""
    section = _SECTION.search(system)
    if section is None:
        return None
    return {
        m["label"]: BlockFields(
            m["description"],
            int(m["limit"]),
            m["read_only"] == "true",
            int(m["current"]),
            m["value"],
        )
        for m in _BLOCK.finditer(section.group(1))
    }


def stored_fields(store: SimKVStore, agent_id: str) -> dict[str, BlockFields] | None:
    """label -> the description, limit and read-only flag of the agent's stored blocks (None:
    no agent, or a record that cannot be read)."""
    try:
        raw = store._get(Keys(agent_id).agent)
        if raw is None:
            return None
        found = {}
        for block_id in unpack(raw).block_ids:
            data = store._get(Keys.block(block_id))
            if data is not None:
                block = unpack(data)
                found[block.label] = BlockFields(block.description, block.limit, block.read_only)
        return found
    except Exception:
        return None


def check_block_fields(
    shown: Mapping[str, BlockFields], stored: Mapping[str, BlockFields], who: str
) -> list[str]:
    """Each block a prompt shows against the stored block of that label: the description, the
    limit and the read-only flag are the stored ones, and ``chars_current`` counts the value
    shown (characters)."""
    problems = []
    for label in sorted(shown):
        got = shown[label]
        if got.chars is not None and got.value is not None and got.chars != len(got.value):
            problems.append(
                f"{who}: block {label} shows chars_current={got.chars} for a value of "
                f"{len(got.value)} characters"
            )
        want = stored.get(label)
        if want is None:
            continue  # not stored (tool_usage_rules), or the value check names it
        for field, a, b in (
            ("chars_limit", got.limit, want.limit),
            ("read_only", got.read_only, want.read_only),
            ("description", got.description, want.description),
        ):
            if a != b:
                problems.append(
                    f"{who}: the prompt shows block {label}'s {field} as {a!r:.80}, the "
                    f"database holds {b!r:.80}"
                )
    return problems
