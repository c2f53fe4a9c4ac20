"""The memory tools' edits, as pure functions of a block's value (exact Letta semantics).

Each returns the new value; a refused edit raises :class:`ToolError` with the message the LLM
sees. Writing the result (and checking the block's limit and ``read_only`` flag) is
:func:`apply_edit`'s job, so every tool enforces them the same way.
"""

from __future__ import annotations

import attrs

from ._models import Block

__all__ = [
    "EDIT_SUCCESS",
    "READ_ONLY_ERROR",
    "ToolError",
    "append",
    "apply_edit",
    "insert",
    "missing_block",
    "replace_all",
    "replace_once",
]

READ_ONLY_ERROR = "Error This block is read-only and cannot be edited."  # Letta's, verbatim


def EDIT_SUCCESS(label: str) -> str:
    return (
        f"The core memory block with label `{label}` has been edited. Review the changes and make "
        "sure they are as expected (correct indentation, no duplicate lines, etc). Edit the "
        "memory block again if necessary."
    )


class ToolError(Exception):
    """A tool refused or failed; ``message`` goes back to the LLM as a failed result, as
    ``Error executing function <tool>: <kind>: <message>``."""

    def __init__(self, message: str, kind: str = "ValueError") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


def missing_block(label: str, labels: list[str]) -> ToolError:
    return ToolError(
        f"Block field {label} does not exist (available sections = {', '.join(labels)})",
        "KeyError",
    )


def append(value: str, content: str) -> str:
    """``core_memory_append``: ``old + "\\n" + content``."""
    return value + "\n" + content


def replace_all(value: str, label: str, old: str, new: str) -> str:
    """``core_memory_replace``: every occurrence of ``old``; an error if there is none."""
    if old == "":
        raise ToolError("old_content must not be empty")
    if old not in value:
        raise ToolError(f"Old content '{old}' not found in memory block '{label}'")
    return value.replace(old, new)


def replace_once(value: str, label: str, old: str, new: str) -> str:
    """``memory_replace``: ``old`` must occur exactly once; otherwise the error quotes the
    lines it occurs on."""
    if old == "":
        raise ToolError("old_string must not be empty")
    count = value.count(old)
    if count == 0:
        raise ToolError(
            f"No replacement was performed, old_string `{old}` did not appear verbatim in "
            f"memory block with label `{label}`."
        )
    if count > 1:
        lines = [i + 1 for i, line in enumerate(value.split("\n")) if old in line]
        if not lines:  # ``old`` spans lines: name the lines each occurrence starts on
            starts, at = [], value.find(old)
            while at != -1:
                starts.append(value.count("\n", 0, at) + 1)
                at = value.find(old, at + 1)
            lines = sorted(set(starts))
        raise ToolError(
            f"No replacement was performed. Multiple occurrences of old_string `{old}` in lines "
            f"{lines}. Please ensure it is unique."
        )
    return value.replace(old, new)


def insert(value: str, new: str, insert_line: int) -> str:
    """``memory_insert``: ``new`` after line ``insert_line`` (0: before the first line,
    -1: after the last)."""
    if isinstance(insert_line, bool) or not isinstance(insert_line, int):
        raise ToolError(f"insert_line must be an integer, got {insert_line!r}")
    lines = value.split("\n")
    n = len(lines)
    at = n if insert_line == -1 else insert_line
    if not 0 <= at <= n:
        raise ToolError(
            f"Invalid `insert_line` parameter: {insert_line}. It should be within the range of "
            f"lines of the memory block: {[0, n]}, or -1 to append to the end of the memory "
            "block."
        )
    return "\n".join(lines[:at] + new.split("\n") + lines[at:])


def apply_edit(block: Block, value: str, now: float) -> Block:
    """``block`` with its new ``value``, unless it is read-only or the value is too long."""
    if block.read_only:
        raise ToolError(READ_ONLY_ERROR)
    if len(value) > block.limit:
        raise ToolError(
            f"Edit failed: Exceeds {block.limit} character limit (requested {len(value)})."
        )
    return attrs.evolve(block, value=value, updated_at=now)
