"""Conversations (Letta's ``/v1/conversations``): several threads of history on one agent.

Records are read straight from storage (``conv/<id>``, the agents' ``convs/`` index); every
change goes through the agent's actor, which serialises it with the agent's runs. Sending,
listing, compacting and cancelling in a conversation are the agent's calls with its id
(``conversation_id=``; ``_messaging``). ``"default"`` with an ``agent_id`` names the agent's
own history where Letta accepts it (fork, cancel, recompile, messages).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kelpie_agent.agent import (
    UPDATABLE_CONVERSATION_FIELDS,
    ConversationRecord,
    CreateConversation,
    DeleteConversation,
    ForkConversation,
    Keys,
    UpdateConversation,
)
from kelpie_agent.agent._codec import unpack

from . import _validate as v
from ._errors import InvalidError, NotFoundError
from ._index import _all
from ._messaging import Messaging
from ._types import paginate

__all__ = ["ARCHIVE_STATUSES", "CONVERSATION_ORDERS", "Conversations"]

ARCHIVE_STATUSES = ("unarchived", "archived", "all")
CONVERSATION_ORDERS = ("created_at", "last_message_at", "last_run_completion")
DEFAULT = "default"


def _sort_key(order_by: str, completions: Mapping[str, float]) -> Any:
    """Letta's orders: by the field, then the id; conversations without a value sort last
    (nulls last), whichever the direction (applied after reversing for ``desc``)."""
    if order_by == "created_at":
        return lambda c: (c.created_at, c.id)
    if order_by == "last_message_at":
        return lambda c: (c.last_message_at or 0.0, c.id)
    return lambda c: (completions.get(c.id, 0.0), c.id)


class Conversations(Messaging):
    """An agent's conversations: create, read, list, update, delete, fork."""

    async def get_conversation(self, conversation_id: str) -> ConversationRecord:
        """The conversation's record (:class:`NotFoundError` if there is none)."""
        self._check_running()
        return await self._thread(conversation_id)

    async def thread_of(
        self, conversation_id: str, agent_id: str | None = None
    ) -> tuple[str, str | None]:
        """``(agent id, conversation id or None)`` of a conversation path parameter:
        ``default`` with ``agent_id`` is the agent's own history (Letta's agent-direct
        mode); an ``agent_id`` given with a conversation must be its agent."""
        if conversation_id == DEFAULT:
            if agent_id is None:
                raise InvalidError("agent_id", "is required with conversation_id 'default'")
            return (await self._agent(agent_id)).id, None
        record = await self.get_conversation(conversation_id)
        if agent_id is not None and agent_id != record.agent_id:
            raise NotFoundError(
                "conversation", conversation_id, f"agent_id: {conversation_id} is not {agent_id}'s"
            )
        return record.agent_id, record.id

    async def create_conversation(
        self,
        agent_id: str,
        *,
        summary: str | None = None,
        description: str | None = None,
        hidden: bool = False,
    ) -> ConversationRecord:
        """A new conversation of the agent (no messages yet)."""
        await self._agent(agent_id)
        request = CreateConversation(summary, description, hidden)
        record: ConversationRecord = await self._request(
            agent_id, request, retry_unknown=False, idempotent=False
        )
        return record

    async def list_conversations(
        self,
        *,
        agent_id: str | None = None,
        after: str | None = None,
        limit: int = 50,
        order: str = "desc",
        order_by: str = "created_at",
        archive_status: str = "unarchived",
        summary_search: str | None = None,
    ) -> list[ConversationRecord]:
        """Conversations of one agent (or all), newest first by default, Letta's filters:
        ``archive_status``, ``summary_search`` (a substring of the summary); hidden ones are
        left out. ``after`` is a conversation id relative to the order."""
        self._check_running()
        limit, descending = v.page_limit(limit), v.order(order)
        if order_by not in CONVERSATION_ORDERS:
            raise InvalidError("order_by", f"must be one of {', '.join(CONVERSATION_ORDERS)}")
        if archive_status not in ARCHIVE_STATUSES:
            raise InvalidError("archive_status", f"must be one of {', '.join(ARCHIVE_STATUSES)}")
        if agent_id is not None:
            await self._agent(agent_id)
            rows = await _all(self.read, Keys(agent_id).conversations)
            ids = [key.rsplit(b"/", 1)[1].decode() for key, _ in rows]
            found = [await self.read.get(Keys.conversation(i), f"conversation {i}") for i in ids]
            records = [unpack(data) for data in found if data is not None]
        else:
            records = [unpack(data) for _, data in await _all(self.read, Keys.CONVERSATIONS)]

        def keep(c: ConversationRecord) -> bool:
            return (
                not c.hidden
                and (archive_status == "all" or c.archived == (archive_status == "archived"))
                and (not summary_search or summary_search in (c.summary or ""))
            )

        chosen = [c for c in records if keep(c)]
        completions: dict[str, float] = {}
        if order_by == "last_run_completion":
            completions = await self._completions({c.agent_id for c in chosen})
        chosen.sort(key=_sort_key(order_by, completions))
        return paginate(
            chosen,
            lambda c: c.id,
            kind="conversation",
            after=after,
            before=None,
            limit=limit,
            descending=descending,
        )

    async def _completions(self, agent_ids: set[str]) -> dict[str, float]:
        """When each conversation's latest finished run of these agents completed."""
        out: dict[str, float] = {}
        for run in await self.list_runs(agent_ids=sorted(agent_ids), limit=v.MAX_PAGE):
            if run.thread_id is not None and not run.running and run.completed_at is not None:
                out[run.thread_id] = max(out.get(run.thread_id, 0.0), run.completed_at)
        return out

    async def update_conversation(
        self, conversation_id: str, changes: Mapping[str, Any]
    ) -> ConversationRecord:
        """Change the conversation's summary, description, archived flag or
        last_message_at (epoch seconds)."""
        for name in changes:
            if name not in UPDATABLE_CONVERSATION_FIELDS:
                raise InvalidError(name, "is not a field a conversation update can change")
        record = await self.get_conversation(conversation_id)
        request = UpdateConversation(record.id, dict(changes))
        new: ConversationRecord = await self._request(record.agent_id, request)
        return new

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete the conversation and its messages (its runs and steps stay). After an
        attempt whose outcome was lost, "not found" means that attempt deleted it."""
        record = await self.get_conversation(conversation_id)
        await self._request(
            record.agent_id,
            DeleteConversation(record.id),
            settled=lambda e: isinstance(e, NotFoundError) and e.kind == "conversation",
        )

    async def fork_conversation(
        self,
        conversation_id: str,
        *,
        agent_id: str | None = None,
        message_id: str | None = None,
        hidden: bool = False,
    ) -> ConversationRecord:
        """A new conversation holding a copy of the thread's history (up to and including
        ``message_id``); ``default`` with ``agent_id`` forks the agent's own history."""
        owner, thread = await self.thread_of(conversation_id, agent_id)
        if message_id is not None:
            v.ident(message_id, "message_id")
        request = ForkConversation(thread, message_id, hidden)
        record: ConversationRecord = await self._request(
            owner, request, retry_unknown=False, idempotent=False
        )
        return record
