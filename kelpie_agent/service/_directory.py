"""What the server knows across agents: tags (``/v1/tags/``), models (``/v1/models/``) and
tool search (``/v1/tools/search``).

All are read from storage (agent records, tools); no actor is activated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from kelpie_agent.agent import AgentRecord, Keys, ToolSpec
from kelpie_agent.agent._codec import unpack
from kelpie_agent.agent._models import DEFAULT_CONTEXT_WINDOW, DEFAULT_MODEL

from . import _validate as v
from ._catalog import Catalog
from ._errors import InvalidError, NotFoundError
from ._index import _all, _owners
from ._search import SEARCH_MODES, rank

if TYPE_CHECKING:
    from kelpie_agent.agent import PassageHit

__all__ = ["PROVIDER", "SEARCH_MODES", "Directory", "ModelInfo", "ToolHit"]


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


@attrs.frozen
class ToolHit:
    """One tool search result (Letta's ToolSearchResult): ranks are 1-based, None when the
    tool was not ranked by that method."""

    tool: ToolSpec
    embedded_text: str
    combined_score: float
    vector_rank: int | None = None
    fts_rank: int | None = None


def tool_text(tool: ToolSpec) -> str:
    """What a tool is searched by: its name (words split), description and tags."""
    return "\n".join([tool.name.replace("_", " "), tool.description, " ".join(tool.tags)])


class Directory(Catalog):
    """Tags, models, tool search and passage search, across agents."""

    if TYPE_CHECKING:  # AgentService's, which asks the agent's actor

        async def search_passages(
            self,
            agent_id: str,
            query: str,
            *,
            tags: Sequence[str] = (),
            tag_match_mode: str = "any",
            top_k: int = 5,
            start: float | None = None,
            end: float | None = None,
        ) -> list[PassageHit]: ...

    async def search_all_passages(
        self,
        query: str,
        *,
        agent_id: str | None = None,
        tags: Sequence[str] = (),
        tag_match_mode: str = "any",
        limit: int = 50,
        start: float | None = None,
        end: float | None = None,
    ) -> list[tuple[str, PassageHit]]:
        """Semantic search over the archival memory of ``agent_id``, or of every agent that
        has passages (one search per agent, through its actor), best first (ties by passage
        id), as ``(agent_id, hit)``."""
        self._check_running()
        limit = v.int_at_least(limit, "limit", 0, v.MAX_PAGE)
        if agent_id is not None:
            owners = [v.ident(agent_id, "agent_id")]
        else:
            owners = await _owners(self.read, b"passage/")
        found: list[tuple[str, PassageHit]] = []
        for owner in owners:
            try:
                hits = await self.search_passages(
                    owner,
                    query,
                    tags=tags,
                    tag_match_mode=tag_match_mode,
                    top_k=limit,
                    start=start,
                    end=end,
                )
            except NotFoundError:
                if agent_id is not None:
                    raise
                continue  # deleted while we searched
            found += [(owner, hit) for hit in hits]
        found.sort(key=lambda pair: (-pair[1].score, pair[1].passage.id))
        return found[:limit]

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
        if before is not None and after is None:  # the tags nearest the cursor (_index.window)
            return chosen[-limit:] if limit else []
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
        default = DEFAULT_MODEL
        by_handle = {default: ModelInfo(default)}
        for agent in await self._agents():
            seen = by_handle.get(agent.model, ModelInfo(agent.model, 0, 0))
            by_handle[agent.model] = ModelInfo(
                agent.model,
                max(seen.context_window, agent.context_window),
                max(seen.max_tokens, agent.max_tokens),
            )
        return [by_handle[handle] for handle in sorted(by_handle)]

    async def search_tools(
        self,
        query: str | None,
        *,
        mode: str = "hybrid",
        tags: Sequence[str] = (),
        tool_types: Sequence[str] = (),
        limit: int = 50,
    ) -> list[ToolHit]:
        """Tools ranked by relevance to ``query``: ``vector`` (cosine of the node's
        embeddings), ``fts`` (the share of the query's words the tool has; tools with none
        are left out) or ``hybrid`` (reciprocal rank fusion of both). ``tags`` keeps tools
        with any of them, ``tool_types`` those of these types. Without a query every tool
        that passes the filters scores 0, in listing order."""
        if mode not in SEARCH_MODES:
            raise InvalidError("search_mode", f"must be one of {', '.join(SEARCH_MODES)}")
        limit = v.int_at_least(limit, "limit", 1, v.MAX_PAGE)
        wanted = set(v.tags(tags, "tags"))
        types = set(v.tags(tool_types, "tool_types"))
        if query is not None:
            v.text(query, "query", empty=True)
        tools = [
            t
            for t in await self.list_tools(limit=v.MAX_PAGE)
            if (not wanted or wanted & set(t.tags)) and (not types or t.tool_type in types)
        ]
        texts = {t.id: tool_text(t) for t in tools}
        if not query:
            return [ToolHit(t, texts[t.id], 0.0) for t in tools[:limit]]
        by_id = {t.id: t for t in tools}
        ranked = await rank(self.embedder, texts, query, mode)
        return [
            ToolHit(by_id[r.id], texts[r.id], r.score, r.vector_rank, r.fts_rank)
            for r in ranked[:limit]
        ]
