"""What the server knows across agents: tags (``/v1/tags/``) and models (``/v1/models/``).

Both are read from the agent records in storage; no actor is activated.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kelpie_agent.agent import AgentRecord, Keys
from kelpie_agent.agent._codec import unpack
from kelpie_agent.agent._models import DEFAULT_CONTEXT_WINDOW

from . import _validate as v
from ._catalog import Catalog
from ._index import _all

__all__ = ["PROVIDER", "Directory", "ModelInfo"]

# The one provider Kelpie speaks (the Anthropic API, real or simulated), a base provider.
PROVIDER = "anthropic"


@attrs.frozen
class ModelInfo:
    """A model agents can use: its handle (``provider/model``) and window."""

    handle: str
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_tokens: int = 4096

    @property
    def name(self) -> str:
        return self.handle.split("/", 1)[1] if "/" in self.handle else self.handle


class Directory(Catalog):
    """Tags and models, across agents."""

    async def _agents(self) -> list[AgentRecord]:
        self._check_running()
        return [unpack(data) for _, data in await _all(self.read, Keys.AGENTS)]

    async def list_tags(
        self,
        *,
        text: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int = 50,
        order: str = "asc",
    ) -> list[str]:
        """Every tag of an agent, alphabetical by default, each once. ``text``: tags that
        contain it (case-insensitive). ``after``/``before`` are tags: those after (before)
        it in the listing order, as Letta's tag cursors (the tag need not exist)."""
        limit, descending = v.page_limit(limit), v.order(order)
        needle = v.text(text, "name", empty=True).casefold() if text is not None else None
        tags = sorted({tag for agent in await self._agents() for tag in agent.tags})
        if descending:
            tags.reverse()

        def beyond(tag: str, cursor: str) -> bool:
            return tag < cursor if descending else tag > cursor

        chosen = [
            tag
            for tag in tags
            if (needle is None or needle in tag.casefold())
            and (after is None or beyond(tag, after))
            and (before is None or beyond(before, tag))
        ]
        return chosen[:limit]

    async def list_models(
        self,
        *,
        provider_name: str | None = None,
        provider_type: str | None = None,
        provider_categories: Sequence[str] = (),
    ) -> list[ModelInfo]:
        """The models agents can use, by handle: the default model and every model an
        agent was given (with the largest window an agent has for it). Kelpie has one
        provider (``anthropic``, category ``base``); the filters keep or drop all of them."""
        for value in (provider_name, provider_type):
            if value is not None and value != PROVIDER:
                return []
        if provider_categories and "base" not in provider_categories:
            return []
        default = str(attrs.fields(AgentRecord).model.default)
        by_handle = {default: ModelInfo(default)}
        for agent in await self._agents():
            seen = by_handle.get(agent.model, ModelInfo(agent.model, 0, 0))
            by_handle[agent.model] = ModelInfo(
                agent.model,
                max(seen.context_window, agent.context_window),
                max(seen.max_tokens, agent.max_tokens),
            )
        return [by_handle[handle] for handle in sorted(by_handle)]
