"""Boundary arguments for ``memory_replace``, and a model of Letta's semantics to judge them.

Letta's ``memory_replace(label, old_str, new_str)`` replaces ``old_str`` only when it occurs
exactly once in the block (``value.count(old_str) == 1``: non-overlapping occurrences, wherever
they are, on one line or across lines); it refuses an empty ``old_str``, one that is not there
and one that occurs more than once (ambiguous), and an edit whose result exceeds the block's
limit. :func:`replace_model` is that rule, written from Letta's documentation and code, not from
Kelpie's (``kelpie_agent/agent/_memory_edits.py``), so the oracle that compares them can tell
when Kelpie drifts.

:func:`pick_old_string` draws the ``old_str`` a careless or adversarial model sends: a word that
occurs twice on one line, a span across a line break, the first or last characters of the
block, non-ASCII characters, empty, absent, or any substring; of the kinds the block's value
makes possible, the two ambiguous ones (the refusals Letta's users depend on) are twice as
likely as each of the others.
"""

from __future__ import annotations

import random

from ._agent_prompt import agents_named

__all__ = ["insert_model", "pick_old_string", "replace_model"]


def replace_model(value: str, old: str, new: str, limit: int) -> tuple[bool, str, str]:
    """``(ok, value after, why)`` of ``memory_replace`` on a block holding ``value``."""
    if old == "":
        return False, value, "an empty old_string"
    count = value.count(old)
    if count != 1:
        return False, value, f"old_string occurs {count} times"
    after = value.replace(old, new)
    if len(after) > limit:
        return False, value, f"replace to {len(after)}/{limit}"
    return True, after, f"replace of a unique old_string, to {len(after)}/{limit}"


def insert_model(value: str, new: str, insert_line: int = -1) -> str | None:
    """Letta's ``memory_insert``: ``new``'s lines after line ``insert_line`` (0: first, -1:
    after the last line; a block's value always has at least one, possibly empty, line); None
    when the line is out of range. ``core_memory_append`` is ``insert_model(value, new)``."""
    lines = value.split("\n")
    at = len(lines) if insert_line == -1 else insert_line
    if not 0 <= at <= len(lines):
        return None
    return "\n".join([*lines[:at], *new.split("\n"), *lines[at:]])


def _twice_on_a_line(value: str, rng: random.Random) -> str:
    """A word (or a single character) that occurs at least twice on one line."""
    found = []
    for line in value.split("\n"):
        words = line.split()
        found += sorted({w for w in words if words.count(w) > 1 or line.count(w) > 1})
        found += sorted({c for c in line if ord(c) > 127 and line.count(c) > 1})
    return rng.choice(found) if found else ""


def _across_lines(value: str, rng: random.Random) -> str:
    breaks = [i for i, c in enumerate(value) if c == "\n"]
    if not breaks:
        return ""
    at = rng.choice(breaks)
    return value[max(0, at - rng.randint(0, 6)) : at + 1 + rng.randint(0, 6)]


def _wide(value: str, rng: random.Random) -> str:
    places = [i for i, c in enumerate(value) if ord(c) > 127]
    if not places:
        return ""
    at = rng.choice(places)
    return value[at : at + rng.randint(1, 3)]


def pick_old_string(value: str, tag: str, agent: int, rng: random.Random) -> tuple[str, str]:
    """``(old_str, kind)`` for a ``memory_replace`` of a block holding ``value``. Never a
    string that names another agent (a substring may cut ``tag-a12`` into ``tag-a1``)."""
    size = rng.randint(1, 8)
    kinds = {
        "absent": f"{tag} absent",
        "empty": "",
        "twice on one line": _twice_on_a_line(value, rng),
        "across lines": _across_lines(value, rng),
        "start": value[:size],
        "end": value[-size:],
        "non-ASCII": _wide(value, rng),
        "substring": "",
    }
    if value:
        at = rng.randrange(len(value))
        kinds["substring"] = value[at : at + size]
    usable = [k for k, old in kinds.items() if old or k == "empty"]
    usable += [k for k in ("twice on one line", "across lines") if k in usable]  # twice as likely
    kind = rng.choice(usable)
    old = kinds[kind]
    if agents_named(old) - {agent}:
        return kinds["absent"], "absent"
    return old, kind
