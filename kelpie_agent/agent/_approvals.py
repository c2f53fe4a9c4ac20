"""Human in the loop: a run that stops on tool calls awaiting approval, and the answer.

When the model calls a tool that requires approval (a ``requires_approval`` rule, or a tool
whose ``default_requires_approval`` is set), the step's calls are stored, the approval ones as
``approval_request_message`` s, and the run ends with ``requires_approval``: its checkpoint
keeps the step's calls pending (``approval="requested"``). Nothing runs until the client
answers through ``messages.create`` with an approval message (Letta's ``ApprovalCreate``):

* ``approvals=[{"type": "approval", "tool_call_id", "approve", "reason"}]`` per call, or
  ``{"type": "tool", "tool_call_id", "tool_return", "status"}`` for a call the client ran
  itself; or the legacy ``approve`` + ``approval_request_id`` for every call of that request.
* The answer must cover exactly the calls awaiting approval (Letta's check).

The answer starts a new run: its first message is the ``approval_response_message`` (it carries
the request's ``otid``, so a retried answer runs once), committed with a checkpoint whose
pending calls carry the decisions. The loop then finishes the step: approved calls run, denied
ones return ``Error: request to call tool denied. User reason: ...``, the client's results are
stored as given, calls that needed no approval run as usual; then the run goes on. A new
ordinary message while a run waits is refused (:class:`PendingApprovalError`, HTTP 409).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ._checkpoint import PendingCall, SessionCheckpoint
from ._codec import pack
from ._errors import InvalidRequestError, PendingApprovalError
from ._messages import AgentMessage, ApprovalDecision, ApprovalResponseMessage
from ._requests import InputMessage
from ._runs import OtidRecord
from ._runtime import AgentRuntime

__all__ = ["refuse_while_waiting", "start_approval_run"]

NOT_WAITING = (
    "Cannot process approval response: No tool call is currently awaiting approval. Please "
    "send a regular message to interact with the agent."
)


def refuse_while_waiting(rt: AgentRuntime) -> None:
    """A new ordinary message while calls await approval is refused (Letta: 409)."""
    cp = rt.session
    if cp is not None and cp.awaiting_approval:
        first = next(c for c in cp.pending if c.approval == "requested")
        raise PendingApprovalError(first.message_id)


def _decisions(cp: SessionCheckpoint, answer: InputMessage) -> dict[str, ApprovalDecision]:
    waiting = [c for c in cp.pending if c.approval == "requested" and not c.done]
    expected = [c.id for c in waiting]
    if answer.approvals:
        decisions = list(answer.approvals)
    elif answer.approve is not None:
        request_ids = {c.message_id for c in waiting}
        if answer.approval_request_id is not None and answer.approval_request_id not in (
            request_ids | set(expected)
        ):
            raise InvalidRequestError(
                f"approval_request_id: {answer.approval_request_id!r} is not the approval "
                f"request awaiting an answer ({', '.join(sorted(request_ids))})"
            )
        reason = answer.content or None
        decisions = [ApprovalDecision(c.id, answer.approve, reason) for c in waiting]
    else:
        raise InvalidRequestError("approvals: an approval message needs approvals or approve")
    given = [d.tool_call_id for d in decisions]
    if sorted(given) != sorted(expected) or len(set(given)) != len(given):
        raise InvalidRequestError(
            f"Invalid tool call IDs. Expected '{expected}', but received '{given}'."
        )
    return {d.tool_call_id: d for d in decisions}


def _decided(call: PendingCall, decision: ApprovalDecision | None) -> PendingCall:
    if decision is None:  # it needed no approval: it runs as usual
        return call
    if decision.tool_return is not None:
        return attrs.evolve(
            call,
            approval="approved",
            client_return=decision.tool_return,
            client_status=decision.status or "success",
        )
    return attrs.evolve(
        call, approval="approved" if decision.approve else "denied", reason=decision.reason
    )


async def start_approval_run(
    rt: AgentRuntime,
    answer: InputMessage,
    follow_ups: list[InputMessage],
    max_steps: int,
    new_input: Callable[[InputMessage, str], AgentMessage],
) -> SessionCheckpoint:
    """Commit the client's answer (and any follow-up messages) with the checkpoint of the new
    run that finishes the waiting step; return that checkpoint. ``new_input(message, run_id)``
    builds a follow-up's stored message."""
    cp = rt.session
    if cp is None or not cp.awaiting_approval:
        raise InvalidRequestError(NOT_WAITING)
    decisions = _decisions(cp, answer)
    run_id = rt.new_id("run")
    now = rt.now()
    response = ApprovalResponseMessage(
        id=rt.new_id("message"),
        date=now,
        seq=rt.alloc_seq(),
        run_id=run_id,
        otid=answer.otid,
        name=answer.name,
        approvals=tuple(decisions[c.id] for c in cp.pending if c.id in decisions),
        approval_request_id=answer.approval_request_id,
    )
    messages: list[AgentMessage] = [response, *(new_input(m, run_id) for m in follow_ups)]
    paused = cp.paused_until if cp.paused_until is not None and now < cp.paused_until else None
    started = SessionCheckpoint(
        session_id=run_id,
        agent_id=rt.agent_id,
        max_steps=max_steps,
        step_id=cp.step_id,
        pending=tuple(_decided(c, decisions.get(c.id)) for c in cp.pending),
        first_seq=response.seq,
        started_at=now,
        updated_at=now,
        paused_until=paused,
        allowed=cp.allowed,
        prefill=cp.prefill,
        thread_id=cp.thread_id,
    )
    records: list[tuple[bytes, bytes | None]] = [(rt.keys.run_index(now, run_id), b"")]
    if answer.otid is not None:  # a retried answer finds this run (exactly once)
        record = OtidRecord(answer.otid, run_id, response.seq)
        records.append((rt.tkeys.otid(answer.otid), pack(record)))
    writes = [*rt.message_writes(messages), *rt.checkpoint_writes(started), *records]
    await rt.write(writes, "the approval answer")
    rt.remember(messages)
    rt.session = started
    return started
