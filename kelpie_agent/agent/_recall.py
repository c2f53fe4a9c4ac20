"""Conversation (recall) memory: searching every stored message of an agent.

``conversation_search`` ranks messages by how many of the query's words they contain (whole
phrase first), newest first among equals; ``conversation_search_date`` pages through a date
range, oldest first, five per page (Letta's page size). Hidden turns (heartbeats, alerts) and
the search tools' own calls are never results.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

from ._archive import parse_when
from ._codec import unpack
from ._errors import InvalidRequestError
from ._messages import (
    AgentMessage,
    AssistantMessage,
    ReasoningMessage,
    ToolCallMessage,
    ToolReturnMessage,
    UserMessage,
    iso_date,
    message_text,
)
from ._runtime import AgentRuntime

__all__ = ["PAGE_SIZE", "all_messages", "search_by_date", "search_text"]

PAGE_SIZE = 5  # Letta's RETRIEVAL_QUERY_DEFAULT_PAGE_SIZE
_WORD = re.compile(r"\w+")
_SEARCH_TOOLS = ("conversation_search", "conversation_search_date")


async def all_messages(rt: AgentRuntime) -> list[AgentMessage]:
    rows = await rt.scan_all(rt.tkeys.messages, "the message history")
    return [unpack(value) for _, value in rows]


def _role_and_text(message: AgentMessage, searched: set[str]) -> tuple[str, str] | None:
    """The role ("user", "assistant", "tool") and text of a searchable message, or None."""
    if isinstance(message, UserMessage):
        return ("user", message.content) if message.kind == "input" else None
    if isinstance(message, AssistantMessage):
        return "assistant", message.content
    if isinstance(message, ReasoningMessage):
        return "assistant", message.reasoning
    if isinstance(message, ToolCallMessage):
        if message.tool_call.name in _SEARCH_TOOLS:
            searched.add(message.tool_call.tool_call_id)
            return None
        if message.tool_call.name == "send_message":
            try:
                text = json.loads(message.tool_call.arguments).get("message")
            except (ValueError, AttributeError):
                text = None
            return ("assistant", text) if isinstance(text, str) else None
        return "assistant", message_text(message)
    if isinstance(message, ToolReturnMessage):
        return None if message.tool_call_id in searched else ("tool", message.tool_return)
    return None


def _entries(messages: Sequence[AgentMessage]) -> list[tuple[AgentMessage, str, str]]:
    searched: set[str] = set()
    out = []
    for message in messages:
        found = _role_and_text(message, searched)
        if found is not None:
            out.append((message, *found))
    return out


def _result(message: AgentMessage, role: str, text: str) -> dict[str, str]:
    return {"timestamp": iso_date(message.date), "role": role, "content": text}


def search_text(
    messages: Sequence[AgentMessage],
    query: str,
    *,
    roles: Sequence[str] | None,
    limit: int | None,
    start: float | None,
    end: float | None,
) -> str:
    """``conversation_search``'s answer."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidRequestError(f"limit must be a positive integer, got {limit!r}")
    wanted = set(roles or ())
    unknown = sorted(wanted - {"user", "assistant", "tool"})
    if unknown:
        raise InvalidRequestError(f"roles must be user, assistant or tool, got {unknown}")
    phrase = query.casefold().strip()
    words = {w for w in _WORD.findall(phrase)}
    scored: list[tuple[float, int, AgentMessage, str, str]] = []
    for message, role, text in _entries(messages):
        if wanted and role not in wanted:
            continue
        if (start is not None and message.date < start) or (end is not None and message.date > end):
            continue
        folded = text.casefold()
        score = float(len(words & set(_WORD.findall(folded))))
        if phrase and phrase in folded:
            score += len(words) + 1
        if score > 0 or not words:
            scored.append((-score, -message.seq, message, role, text))
    scored.sort(key=lambda item: (item[0], item[1]))
    hits = scored[: limit or PAGE_SIZE]
    if not hits:
        return "No results found."
    results = [_result(m, role, text) for _, _, m, role, text in hits]
    return f"Showing {len(results)} results: {json.dumps(results, ensure_ascii=False)}"


def search_by_date(
    messages: Sequence[AgentMessage], start_date: str, end_date: str, page: int, timezone: str
) -> str:
    """``conversation_search_date``'s answer."""
    start = parse_when(start_date, timezone, end=False, what="start_date")
    end = parse_when(end_date, timezone, end=True, what="end_date")
    if start is None or end is None:
        raise InvalidRequestError("start_date and end_date are both required")
    if isinstance(page, bool) or not isinstance(page, int) or page < 0:
        raise InvalidRequestError(f"page must be an integer >= 0, got {page!r}")
    matches = [(m, role, text) for m, role, text in _entries(messages) if start <= m.date <= end]
    total = len(matches)
    if total == 0:
        return "No results found."
    pages = max(1, math.ceil(total / PAGE_SIZE))
    chosen = matches[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
    results = [_result(m, role, text) for m, role, text in chosen]
    return (
        f"Showing {len(results)} of {total} results (page {page}/{pages - 1}): "
        f"{json.dumps(results, ensure_ascii=False)}"
    )
