"""Archives through the service (Letta's ``archives`` and ``agents.archives``): archival
memory shared between agents. Functions of an :class:`AgentService`, as ``_portability``.

Archive records and their passages are written by :class:`ArchiveStore` in plain
transactions (an archive is not an actor); attaching one to an agent goes through the agent's
actor (``AttachShared``), which writes the agent record and the link in one transaction.
Deleting an archive detaches it from the agents it was attached to, then deletes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from kelpie_agent.agent import (
    ArchiveRecord,
    ArchiveStore,
    AttachShared,
    DetachShared,
    PassageRecord,
)
from kelpie_agent.agent._archive import embedder_name
from kelpie_agent.embeddings import Embedder

from ._types import paginate

if TYPE_CHECKING:
    from ._service import AgentService

__all__ = [
    "PassageItem",
    "add_archive_passages",
    "attach_archive",
    "create_archive",
    "delete_archive",
    "delete_archive_passage",
    "detach_archive",
    "get_archive",
    "link",
    "list_archives",
    "unlink",
    "update_archive",
]

T = TypeVar("T")
PassageItem = tuple[str, tuple[str, ...], Mapping[str, Any], float | None]


async def _call(service: AgentService, op: Callable[[], Awaitable[T]]) -> T:
    """A store call with the service's checks and error mapping (writes retry themselves)."""
    return await service._store(op, "", retry=False)


def _store(service: AgentService) -> ArchiveStore:
    return ArchiveStore(service.kv, service.ports)


def _embedder(service: AgentService) -> Embedder:
    """The node's embedder (the one its agents embed passages with)."""
    return service.embedder


async def create_archive(service: AgentService, name: str, **fields: Any) -> ArchiveRecord:
    return await _call(service, lambda: _store(service).create(name, **fields))


async def get_archive(service: AgentService, archive_id: str) -> ArchiveRecord:
    return await _call(service, lambda: _store(service).get(archive_id))


async def list_archives(
    service: AgentService,
    *,
    name: str | None = None,
    agent_id: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    descending: bool = True,
) -> list[ArchiveRecord]:
    """Archives oldest first, filtered by ``name`` and by ``agent_id`` (attached to it)."""
    found = await _call(service, _store(service).all)
    if name is not None:
        found = [a for a in found if a.name == name]
    if agent_id is not None:
        attached = set((await service._agent(agent_id)).archive_ids)
        found = [a for a in found if a.id in attached]
    return paginate(
        found,
        lambda a: a.id,
        kind="archive",
        after=after,
        before=before,
        limit=limit,
        descending=descending,
    )


async def update_archive(
    service: AgentService, archive_id: str, changes: Mapping[str, Any]
) -> ArchiveRecord:
    return await _call(service, lambda: _store(service).update(archive_id, **changes))


async def delete_archive(service: AgentService, archive_id: str) -> None:
    store = _store(service)
    for agent_id in await _call(service, lambda: store.agents(archive_id)):
        await service._request(agent_id, DetachShared("archive", archive_id))
    await _call(service, lambda: store.delete(archive_id))


async def add_archive_passages(
    service: AgentService, archive_id: str, items: Sequence[PassageItem]
) -> list[PassageRecord]:
    embedder = _embedder(service)
    return await _call(
        service,
        lambda: _store(service).add_passages(
            archive_id, list(items), embedder, embedder_name(embedder)
        ),
    )


async def delete_archive_passage(service: AgentService, archive_id: str, passage_id: str) -> None:
    await _call(service, lambda: _store(service).delete_passage(archive_id, passage_id))


async def link(
    service: AgentService, agent_id: str, kind: Literal["archive", "identity"], target: str
) -> None:
    """Attach an archive or an identity to the agent, through its actor (the agent record and
    the link key in one transaction); a missing target is a 404."""
    await service._agent(agent_id)
    await service._request(agent_id, AttachShared(kind, target))


async def unlink(
    service: AgentService, agent_id: str, kind: Literal["archive", "identity"], target: str
) -> None:
    """Detach it (detaching what is not attached changes nothing)."""
    await service._agent(agent_id)
    await service._request(agent_id, DetachShared(kind, target))


async def attach_archive(service: AgentService, agent_id: str, archive_id: str) -> None:
    await link(service, agent_id, "archive", archive_id)


async def detach_archive(service: AgentService, agent_id: str, archive_id: str) -> None:
    await unlink(service, agent_id, "archive", archive_id)
