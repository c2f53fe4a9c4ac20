"""The agent's context window record (``context/<agent_id>``); see ``_compaction``."""

from __future__ import annotations

import attrs

from ._messages import UserMessage

__all__ = ["ContextWindow"]


@attrs.frozen
class ContextWindow:
    """Where the agent's context starts, and the summary message of what came before."""

    start_seq: int = 0  # messages before this one are out of context (still stored)
    summary: UserMessage | None = None  # the latest summary message (kind "summary")
    text: str = ""  # the latest summary itself (what the model wrote, clipped)
    compactions: int = 0
    evicted: int = 0  # messages taken out of context so far
