"""Attaching an agent to shared things it does not own: archives and identities.

The agent's record lists the ids (``archive_ids``, ``identity_ids``), and a link key per pair
(``archiveagent/<archive>/<agent>``, ``identityagent/<identity>/<agent>``) lets the shared side
list its agents; both are written in one fenced transaction by the agent's actor. Detaching
what is not attached is a no-op (Letta's archives), so a retried detach settles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from kelpie_agent.storage import Transaction

from ._archives import archive_key
from ._archives import link_key as archive_link
from ._codec import pack
from ._errors import ResourceNotFoundError
from ._identities import identity_key
from ._identities import link_key as identity_link
from ._runtime import AgentRuntime

__all__ = ["KINDS", "attach", "detach", "link_deletes"]

# kind -> (agent record field, the resource's key, the link key)
KINDS: dict[str, tuple[str, Callable[[str], bytes], Callable[[str, str], bytes]]] = {
    "archive": ("archive_ids", archive_key, archive_link),
    "identity": ("identity_ids", identity_key, identity_link),
}


async def _write(rt: AgentRuntime, writes: list[tuple[bytes, bytes | None]], what: str) -> None:
    async def build(txn: Transaction) -> None:
        for key, value in writes:
            if value is None:
                await txn.delete(key)
            else:
                await txn.set(key, value)

    await rt.commit(build, what)


async def attach(rt: AgentRuntime, kind: str, target: str) -> None:
    field, resource_key, link_key = KINDS[kind]
    agent = rt.require()
    current: tuple[str, ...] = getattr(agent, field)
    if target in current:
        return
    if await rt.get(resource_key(target), f"{kind} {target}") is None:
        raise ResourceNotFoundError(kind, target)
    changes: dict[str, Any] = {field: (*current, target), "updated_at": rt.now()}
    new = attrs.evolve(agent, **changes)
    await _write(rt, [(rt.keys.agent, pack(new)), (link_key(target, agent.id), b"")], kind)
    rt.agent = new


async def detach(rt: AgentRuntime, kind: str, target: str) -> None:
    field, _, link_key = KINDS[kind]
    agent = rt.require()
    current: tuple[str, ...] = getattr(agent, field)
    if target not in current:
        return
    changes: dict[str, Any] = {field: tuple(t for t in current if t != target)}
    new = attrs.evolve(agent, **changes, updated_at=rt.now())
    await _write(rt, [(rt.keys.agent, pack(new)), (link_key(target, agent.id), None)], kind)
    rt.agent = new


def link_deletes(rt: AgentRuntime) -> list[tuple[bytes, bytes | None]]:
    """The link keys of a deleted agent."""
    agent = rt.require()
    out: list[tuple[bytes, bytes | None]] = []
    for field, _, link_key in KINDS.values():
        out += [(link_key(target, agent.id), None) for target in getattr(agent, field)]
    return out
