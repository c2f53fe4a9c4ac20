"""Identities attached to agents (``/v1/agents/{agent_id}/identities/attach|detach/{id}``).

Identities themselves are made by the agent core's :class:`IdentityStore` (letta-client 1.12.1
has no ``identities`` resource to create them over REST); attaching one goes through the agent's
actor, which writes the agent record and the link in one transaction, so ``agents.list``'s
``identity_id`` filter sees exactly the attached agents. Both answer the agent (Letta's
``AgentState``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from kelpie_agent.service import _archives as shared

from ._context import current_service
from ._models_agents import AgentState, agent_out
from ._params import ID_PATTERN, AgentId
from ._routing import ERROR_RESPONSES

__all__ = ["identities_router"]

IdentityId = Annotated[str, Path(pattern=ID_PATTERN, description="An identity id (identity-...)")]


def identities_router() -> APIRouter:
    router = APIRouter(tags=["agents"], responses=ERROR_RESPONSES)

    @router.patch("/v1/agents/{agent_id}/identities/attach/{identity_id}")
    async def attach_identity(agent_id: AgentId, identity_id: IdentityId) -> AgentState:
        """Attach the identity to the agent (a missing identity is a 404)."""
        service = current_service()
        await shared.link(service, agent_id, "identity", identity_id)
        return agent_out(await service.get_agent(agent_id))

    @router.patch("/v1/agents/{agent_id}/identities/detach/{identity_id}")
    async def detach_identity(agent_id: AgentId, identity_id: IdentityId) -> AgentState:
        """Detach it (detaching an identity that is not attached changes nothing)."""
        service = current_service()
        await shared.unlink(service, agent_id, "identity", identity_id)
        return agent_out(await service.get_agent(agent_id))

    return router
