"""Human in the loop: whether calls of one of an agent's tools wait for a client's approval.

``PATCH /v1/agents/{agent_id}/tools/approval/{tool_name}`` with ``{"requires_approval": bool}``
(or the query parameter) adds or removes the agent's ``requires_approval`` rule for the tool,
as Letta does. The answer to a run that stopped on such a call goes through ``messages.create``
(an ``approval`` message: :class:`InputMessageModel` with ``type: "approval"``).
"""

from __future__ import annotations

from fastapi import APIRouter, Body, Query

from kelpie_agent.service import InvalidError

from ._context import current_service
from ._models_agents import AgentState, agent_out
from ._params import AgentId, ToolName
from ._routing import ERROR_RESPONSES

__all__ = ["approvals_router"]


def approvals_router() -> APIRouter:
    router = APIRouter(tags=["tools"], responses=ERROR_RESPONSES)

    @router.patch("/v1/agents/{agent_id}/tools/approval/{tool_name}")
    async def update_approval(
        agent_id: AgentId,
        tool_name: ToolName,
        body_requires_approval: bool | None = Body(
            default=None, alias="requires_approval", embed=True
        ),
        query_requires_approval: bool | None = Query(default=None, alias="requires_approval"),
    ) -> AgentState:
        """Set whether calls of the agent's tool ``tool_name`` need the client's approval
        (the agent's ``requires_approval`` tool rule for it)."""
        flag = body_requires_approval
        if flag is None:
            flag = query_requires_approval
        if flag is None:
            raise InvalidError("body.requires_approval", "give true or false", status=400)
        view = await current_service().set_tool_approval(agent_id, tool_name, flag)
        return agent_out(view)

    return router
