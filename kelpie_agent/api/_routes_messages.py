"""Sending messages to an agent: as JSON, streamed (SSE), in the background (``/async``),
and cancelling its runs. Reading the history is in ``_routes_history``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio
from fastapi import APIRouter

from kelpie_agent.agent import LettaStopReason, StreamEvent, TurnResult, letta_json
from kelpie_agent.service import InvalidError

from ._context import current, current_service
from ._models_messages import CancelRequest, LettaResponse, MessageRequest, SendRequest
from ._models_runs import Run, run_out
from ._params import AgentId
from ._routing import ERROR_RESPONSES
from ._sse import SseResponse, pinger

__all__ = ["STREAM_DOC", "keeper", "letta_response", "messages_router", "stream_response"]

# One server-sent event (OpenAPI < 3.2: the schema of a text/event-stream describes each event).
_EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["message", "error"]},
        "data": {
            "type": "string",
            "description": "a JSON frame (message_type tells which), or [DONE]",
        },
    },
    "required": ["data"],
}
_STREAM_DOC = {
    "description": "Server-sent events: message frames, stop_reason, usage_statistics, [DONE]",
    "content": {"text/event-stream": {"schema": _EVENT}},
}


STREAM_DOC = _STREAM_DOC  # the OpenAPI description of a route's server-sent events


def keeper(types: Sequence[str] | None) -> Callable[[Mapping[str, Any]], bool]:
    if types is None:
        return lambda frame: True
    wanted = set(types)
    return lambda frame: frame.get("message_type") in wanted


def letta_response(result: TurnResult, types: Sequence[str] | None) -> LettaResponse:
    """A finished run as Letta's JSON answer, with only the message types asked for."""
    keep = keeper(types)
    messages = [m for m in (letta_json(m) for m in result.response_messages) if keep(m)]
    return LettaResponse.model_validate(
        {
            "messages": messages,
            "stop_reason": letta_json(LettaStopReason(result.stop_reason)),
            "usage": letta_json(result.usage),
        }
    )


def stream_response(
    agent_id: AgentId, body: MessageRequest, conversation_id: str | None = None
) -> SseResponse:
    """The run of ``body`` on the agent (in its conversation ``conversation_id``, if given)
    as server-sent events (the service's ``stream_to`` feeds the response's channel)."""
    node = current()
    service = node.service
    inputs = body.inputs()

    async def produce(channel: trio.MemorySendChannel[StreamEvent]) -> None:
        await service.stream_to(
            agent_id,
            inputs,
            channel,
            max_steps=body.max_steps,
            stream_tokens=body.stream_tokens,
            use_assistant_message=body.use_assistant_message,
            conversation_id=conversation_id,
        )

    return SseResponse(
        produce,
        keep=keeper(body.include_return_message_types),
        ping=pinger(service.ports) if body.include_pings else None,
        ping_interval=node.ping_interval,
        observer=node.observer,
    )


def messages_router() -> APIRouter:
    router = APIRouter(tags=["messages"], responses=ERROR_RESPONSES)

    @router.post(
        "/v1/agents/{agent_id}/messages",
        response_model=LettaResponse,
        responses={200: {"content": _STREAM_DOC["content"]}},
    )
    async def send_message(agent_id: AgentId, body: SendRequest) -> Any:
        """Run the agent on the input. ``streaming: true`` answers with server-sent events,
        otherwise the finished run as JSON (LettaResponse)."""
        if body.streaming:
            return stream_response(agent_id, body)
        problem = body.stream_only_problem()
        if problem is not None:
            raise InvalidError(*problem)
        result = await current_service().send_message(
            agent_id,
            body.inputs(),
            max_steps=body.max_steps,
            use_assistant_message=body.use_assistant_message,
        )
        return letta_response(result, body.include_return_message_types)

    @router.post(
        "/v1/agents/{agent_id}/messages/stream",
        response_class=SseResponse,
        status_code=200,
        responses={200: _STREAM_DOC},
    )
    async def stream_message(agent_id: AgentId, body: MessageRequest) -> SseResponse:
        """The same as ``/messages`` with ``streaming: true``."""
        return stream_response(agent_id, body)

    @router.post("/v1/agents/{agent_id}/messages/async")
    async def send_message_async(agent_id: AgentId, body: MessageRequest) -> Run:
        """Start a run in the background and answer at once with it (``running``, or
        ``completed`` if it was that quick); poll it at ``/v1/runs/{id}``."""
        record = await current_service().start_run(
            agent_id,
            body.inputs(),
            max_steps=body.max_steps,
            use_assistant_message=body.use_assistant_message,
        )
        return run_out(record)

    @router.post("/v1/agents/{agent_id}/messages/cancel")
    async def cancel_runs(agent_id: AgentId, body: CancelRequest | None = None) -> dict[str, Any]:
        """Ask the agent's runs that this node is serving to stop after their current step
        (stop reason ``cancelled``). ``run_ids`` is refused (422)."""
        service = current_service()
        await service.get_agent(agent_id)
        return {"cancelled": service.cancel_runs(agent_id)}

    return router
