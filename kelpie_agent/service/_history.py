"""Messages across agents (Letta's top-level ``/v1/messages/``), read from storage.

Every agent's history is under ``msg/<agent>/``, so listing every message is one scan of
``msg/`` (then a sort by date: it reads every message, fine for a simulated deployment's
sizes, not for a large one). Finding a message by id asks each agent's ``msgid/`` index.
"""

from __future__ import annotations

from collections.abc import Sequence

from kelpie_agent.agent import AgentMessage, ConversationRecord, Keys, render_messages
from kelpie_agent.agent._codec import unpack

from . import _validate as v
from ._directory import Directory
from ._errors import InvalidError, NotFoundError
from ._index import _all, _owners
from ._search import SEARCH_MODES, rank
from ._types import paginate

__all__ = ["SEARCHED_TYPES", "History", "message_text"]

# the message types Letta's message search answers (its result union)
SEARCHED_TYPES = ("system_message", "user_message", "reasoning_message", "assistant_message")


def message_text(message: AgentMessage) -> str:
    """What a search matches in a message: its content, or its reasoning."""
    text = getattr(message, "content", None)
    if text is None:
        text = getattr(message, "reasoning", "")
    return text if isinstance(text, str) else str(text)


_MESSAGES = b"msg/"
_MESSAGE_IDS = b"msgid/"


class History(Directory):
    """Messages across agents."""

    async def all_messages(
        self,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        order: str = "desc",
        types: Sequence[str] | None = None,
        conversation_id: str | None = None,
    ) -> list[AgentMessage]:
        """Every agent's messages by date (then id), newest first by default, as Letta shows
        them; ``types`` keeps those message types; ``after``/``before`` are message ids in
        the listing order; ``conversation_id`` keeps that conversation's (404 if there is no
        such conversation)."""
        self._check_running()
        limit, descending = v.page_limit(limit), v.order(order)
        prefix = _MESSAGES
        if conversation_id is not None:
            prefix = Keys((await self._thread(conversation_id)).id).messages
        by_agent: dict[str, list[AgentMessage]] = {}
        for key, value in await _all(self.read, prefix):
            by_agent.setdefault(key.split(b"/")[1].decode(), []).append(unpack(value))
        shown = [m for messages in by_agent.values() for m in render_messages(messages)]
        if types is not None:
            wanted = set(types)
            shown = [m for m in shown if m.message_type in wanted]
        shown.sort(key=lambda m: (m.date, m.id))
        return paginate(
            shown,
            lambda m: m.id,
            kind="message",
            after=after,
            before=before,
            limit=limit,
            descending=descending,
        )

    async def search_messages(
        self,
        query: str,
        *,
        agent_id: str | None = None,
        conversation_id: str | None = None,
        mode: str = "hybrid",
        start: float | None = None,
        end: float | None = None,
        limit: int = 50,
    ) -> list[tuple[str, AgentMessage]]:
        """``(agent id, message)`` pairs, best match first (Letta's message search): the
        messages users, the agent (assistant text and reasoning) and the system wrote, as
        Letta shows them (hidden turns left out), of one agent or all, created after
        ``start`` and at or before ``end`` (epoch seconds), ranked as ``tools.search`` ranks
        (``vector``, ``fts`` or ``hybrid``); ``conversation_id`` searches that conversation
        (of ``agent_id``, if given). The agent id of a conversation's message is its agent's."""
        self._check_running()
        if mode not in SEARCH_MODES:
            raise InvalidError("search_mode", f"must be one of {', '.join(SEARCH_MODES)}")
        v.text(query, "query", empty=True)
        limit = v.int_at_least(limit, "limit", 1, v.MAX_PAGE)
        prefix = Keys(v.ident(agent_id, "agent_id")).messages if agent_id else _MESSAGES
        if conversation_id is not None:
            conv = await self._thread(conversation_id)
            if agent_id is not None and conv.agent_id != agent_id:
                raise NotFoundError(
                    "conversation", conversation_id, f"conversation_id: not {agent_id}'s"
                )
            prefix = Keys(conv.id).messages
        by_agent: dict[str, list[AgentMessage]] = {}
        owners: dict[str, str] = {}
        for key, value in await _all(self.read, prefix):
            thread = key.split(b"/")[1].decode()
            if thread not in owners:
                owners[thread] = await self._owner_of(thread)
            by_agent.setdefault(owners[thread], []).append(unpack(value))
        found: dict[str, tuple[str, AgentMessage]] = {}
        for owner, messages in by_agent.items():
            for m in render_messages(messages):
                if (
                    m.message_type in SEARCHED_TYPES
                    and getattr(m, "kind", "input") == "input"
                    and (start is None or m.date > start)
                    and (end is None or m.date <= end)
                ):
                    found[m.id] = (owner, m)
        texts = {mid: message_text(m) for mid, (_, m) in found.items()}
        ranked = await rank(self.embedder, texts, query, mode) if query else []
        return [found[r.id] for r in ranked[:limit]]

    async def _thread(self, conversation_id: str) -> ConversationRecord:
        """Conversation ``conversation_id``'s record (NotFoundError if there is none)."""
        key = Keys.conversation(v.ident(conversation_id, "conversation_id"))
        data = await self.read.get(key, f"conversation {conversation_id}")
        if data is None:
            raise NotFoundError("conversation", conversation_id)
        record: ConversationRecord = unpack(data)
        return record

    async def _owner_of(self, thread: str) -> str:
        """The agent a history belongs to: the agent's own, or a conversation's agent."""
        data = await self.read.get(Keys.conversation(thread), f"conversation {thread}")
        return thread if data is None else str(unpack(data).agent_id)

    async def get_message(self, message_id: str) -> list[AgentMessage]:
        """Message ``message_id``, whichever agent has it, as Letta shows it (a list: Letta
        may show one stored message as several; a ``send_message`` call is its assistant
        message, and its return, hidden in listings, is shown as stored)."""
        self._check_running()
        v.ident(message_id, "message_id")
        for agent_id in await _owners(self.read, _MESSAGE_IDS):
            keys = Keys(agent_id)
            seq = await self.read.get(keys.message_id(message_id), f"message {message_id}")
            if seq is not None:
                data = await self.read.get(keys.message(unpack(seq)), f"message {message_id}")
                if data is not None:
                    message: AgentMessage = unpack(data)
                    return render_messages([message]) or [message]
        raise NotFoundError("message", message_id)
