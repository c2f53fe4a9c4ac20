"""An agent's messages: send (JSON, stream, async), list, reset, cancel."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

import trio
from fastapi import APIRouter, Query

from kelpie_agent.agent import AgentMessage, LettaStopReason, StreamEvent, letta_json

from ._context import current, current_service
from ._errors import ApiError
from ._models_agents import AgentState, agent_out
from ._models_common import epoch_datetime
from ._models_messages import (
    CancelRequest,
    LettaMessage,
    LettaResponse,
    MessageRequest,
    MessageType,
    Run,
    SendRequest,
)
from ._params import AgentId, Cursor
from ._routes_agents import MAX_PAGE
from ._routing import ERROR_RESPONSES
from ._sse import SseResponse

__all__ = ["messages_router"]

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


def _keeper(types: Sequence[str] | None) -> Callable[[Mapping[str, Any]], bool]:
    if types is None:
        return lambda frame: True
    wanted = set(types)
    return lambda frame: frame.get("message_type") in wanted


def messages_router() -> APIRouter:
    router = APIRouter(tags=["messages"], responses=ERROR_RESPONSES)

    def stream_response(agent_id: AgentId, body: MessageRequest) -> SseResponse:
        node = current()
        service = node.service
        inputs = body.inputs()

        def ping() -> dict[str, Any]:
            moment = epoch_datetime(service.ports.clock.now()).isoformat()
            return {"message_type": "ping", "id": service.ports.ids.new("ping"), "date": moment}

        async def produce(channel: trio.MemorySendChannel[StreamEvent]) -> None:
            async with service.stream_message(
                agent_id,
                inputs,
                max_steps=body.max_steps,
                stream_tokens=body.stream_tokens,
                use_assistant_message=body.use_assistant_message,
            ) as stream:
                async for event in stream:
                    try:
                        await channel.send(event)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return  # the client left; the run goes on in the agent

        return SseResponse(
            produce,
            keep=_keeper(body.include_return_message_types),
            ping=ping if body.include_pings else None,
            ping_interval=node.ping_interval,
            observer=node.observer,
        )

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
            raise ApiError(422, problem)
        result = await current_service().send_message(
            agent_id,
            body.inputs(),
            max_steps=body.max_steps,
            use_assistant_message=body.use_assistant_message,
        )
        keep = _keeper(body.include_return_message_types)
        messages = [m for m in (letta_json(m) for m in result.response_messages) if keep(m)]
        return LettaResponse.model_validate(
            {
                "messages": messages,
                "stop_reason": letta_json(LettaStopReason(result.stop_reason)),
                "usage": letta_json(result.usage),
            }
        )

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
        """Start a run and answer at once with it (``running``, or ``completed`` if it was
        that quick); the agent finishes it in the background."""
        node = current()
        service, background, observer = node.service, node.background, node.observer
        found: list[str] = []
        known = trio.Event()
        finished: list[str] = []
        failure: list[Exception] = []

        async def consume(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            started = False
            try:
                async with service.stream_message(
                    agent_id,
                    body.inputs(),
                    max_steps=body.max_steps,
                    use_assistant_message=body.use_assistant_message,
                ) as stream:
                    task_status.started()
                    started = True
                    async for event in stream:
                        run_id = getattr(event, "run_id", None)
                        if run_id and not found:
                            found.append(run_id)
                            known.set()
                            if background.nursery is None:
                                return  # leaving never stops the run
                        if isinstance(event, LettaStopReason):
                            finished.append(event.stop_reason)
                    if stream.result is not None and not found:
                        found.append(stream.result.run_id)
            except Exception as error:
                if not started or background.nursery is None:
                    raise
                failure.append(error)  # a background run must not take the app down
                if observer is not None:
                    with contextlib.suppress(Exception):  # nor may a failing observer
                        observer("api.async_run_error", agent=agent_id, error=type(error).__name__)
            finally:
                known.set()

        if background.nursery is not None:
            await background.nursery.start(consume)
            await known.wait()
        else:
            await consume()
        if not found and failure:
            raise failure[0]
        if not found:
            raise ApiError(
                503, f"agent {agent_id}: the run ended before it started", retryable=True
            )
        status: Literal["running", "completed"] = "completed" if finished else "running"
        return Run(
            id=found[0],
            agent_id=agent_id,
            status=status,
            stop_reason=finished[0] if finished else None,  # type: ignore[arg-type]
            created_at=epoch_datetime(service.ports.clock.now()),
        )

    @router.post("/v1/agents/{agent_id}/messages/cancel")
    async def cancel_runs(agent_id: AgentId, body: CancelRequest | None = None) -> dict[str, Any]:
        """Ask the agent's runs that this node is serving to stop after their current step
        (stop reason ``cancelled``). ``run_ids`` is accepted; every such run is asked."""
        service = current_service()
        await service.get_agent(agent_id)
        return {"cancelled": service.cancel_runs(agent_id)}

    @router.get("/v1/agents/{agent_id}/messages")
    async def list_messages(
        agent_id: AgentId,
        after: Cursor = None,
        before: Cursor = None,
        limit: Annotated[int, Query(ge=0, le=MAX_PAGE)] = 100,
        order: Literal["asc", "desc"] = "desc",
        use_assistant_message: bool = True,
        include_return_message_types: Annotated[list[MessageType] | None, Query()] = None,
    ) -> list[LettaMessage]:
        """The agent's history, newest first by default; ``after``/``before`` are message
        ids relative to the order."""
        keep = _keeper(include_return_message_types)
        out: list[dict[str, Any]] = []
        cursor_after = after
        while True:
            batch: list[AgentMessage] = await current_service().list_messages(
                agent_id,
                after=cursor_after,
                before=before,
                limit=limit,
                order=order,
                use_assistant_message=use_assistant_message,
            )
            out.extend(m for m in (letta_json(m) for m in batch) if keep(m))
            if include_return_message_types is None or len(out) >= limit or len(batch) < limit:
                break
            if before is not None and after is None:
                break  # paging backwards: one window only
            cursor_after = batch[-1].id
        return out[:limit]  # type: ignore[return-value]

    @router.patch("/v1/agents/{agent_id}/reset-messages")
    async def reset_messages(agent_id: AgentId) -> AgentState:
        """Delete the agent's message history (memory and archival memory stay)."""
        return agent_out(await current_service().reset_messages(agent_id))

    return router
