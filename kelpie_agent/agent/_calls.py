"""The tool calls of a step: check, run, record durably one by one, then decide what's next.

Each call's result is committed in its own transaction, together with the checkpoint marking
the call done (and, for the step's last call, the end-of-step decision and heartbeat). So a
crash never loses a recorded result, and a resumed run skips every call marked done.

Refusals (doc 004's loop failures) never reach the tool: a call to an unknown tool, with
arguments that are not a JSON object or break the schema, the same call with the same
arguments ``max_identical_calls`` times in a run, calls beyond ``max_tool_calls``, or beyond a
``max_count_per_step`` rule. The LLM gets a failed result explaining why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import attrs

from kelpie_agent.llm import ToolCall
from kelpie_agent.storage import Transaction

from ._checkpoint import PendingCall, SessionCheckpoint
from ._executor import ToolOutcome, run_tool
from ._messages import AgentMessage, ToolReturnMessage, UserMessage
from ._models import DEFAULT_RETURN_CHAR_LIMIT
from ._runtime import AgentRuntime
from ._teleport import IMAGES
from ._toolset import Prepared, Refused, ToolSet

__all__ = [
    "FAILED_HEARTBEAT",
    "REQ_HEARTBEAT",
    "CallResult",
    "end_step",
    "finish",
    "package",
    "run_call",
    "signature",
]

NON_USER = "[This is an automated system message hidden from the user] "
REQ_HEARTBEAT = f"{NON_USER}Function called using request_heartbeat=true, returning control"
FAILED_HEARTBEAT = f"{NON_USER}Function call failed, returning control"
CONTINUE_HEARTBEAT = f"{NON_USER}Continuing: a tool rule asks to continue after this tool"
DENIED = "Error: request to call tool denied. User reason: {reason}"


def expects(uncalled: list[str]) -> str:
    """Letta's heartbeat reason while ``required_before_exit`` tools are still uncalled."""
    names = ", ".join(uncalled)
    return f"{NON_USER}Continuing, user expects these tools: [{names}] to be called still."


def package(ok: bool, text: str, time: str, limit: int = DEFAULT_RETURN_CHAR_LIMIT) -> str:
    """Letta's tool result: ``{"status": "OK"|"Failed", "message": ..., "time": ...}``."""
    if len(text) > limit:
        text = (
            f"{text[:limit]}... [NOTE: function output was truncated since it exceeded the "
            f"character limit: {len(text)} > {limit}]"
        )
    return json.dumps(
        {"status": "OK" if ok else "Failed", "message": text, "time": time}, ensure_ascii=False
    )


def signature(name: str, args: dict[str, Any]) -> str:
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{name}:{hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()}"


def finish(
    rt: AgentRuntime, cp: SessionCheckpoint, reason: str, error: str | None = None
) -> SessionCheckpoint:
    return attrs.evolve(
        cp,
        status="done",
        stop_reason=reason,
        pending=(),
        step_id=None,
        updated_at=rt.now(),
        error=error,
    )


def _check(
    rt: AgentRuntime, tools: ToolSet, cp: SessionCheckpoint, call: PendingCall
) -> Prepared | Refused:
    approved = call.approval == "approved"
    allowed = cp.allowed
    if not approved and allowed is not None and call.name in tools and call.name not in allowed:
        return Refused(tools.solver.violation(call.name, allowed, cp.tool_history))
    prefill = None if approved else dict(cp.prefill).get(call.name)
    prepared = tools.prepare(
        ToolCall(call.id, call.name, call.arguments), json.loads(prefill) if prefill else None
    )
    if isinstance(prepared, Refused):
        return prepared
    config = rt.config
    if cp.tool_calls >= config.max_tool_calls:
        return Refused(
            f"invalid_tool_call: tool call budget exhausted ({cp.tool_calls} calls in this run); "
            "answer now without calling more tools"
        )
    seen = cp.count("call_counts", signature(call.name, prepared.args))
    if seen >= config.max_identical_calls:
        return Refused(
            f"invalid_tool_call: repeated identical call: {call.name} already ran {seen} times "
            "with these arguments in this run; use the earlier results instead"
        )
    limit = prepared.tool.max_count
    if limit is not None and cp.count("tool_counts", call.name) >= limit:
        return Refused(
            f"invalid_tool_call: tool rule: {call.name} may run at most {limit} times per run"
        )
    return prepared


def end_step(
    rt: AgentRuntime,
    tools: ToolSet,
    cp: SessionCheckpoint,
    reserve: Callable[[], tuple[str, int]],
) -> tuple[SessionCheckpoint, list[AgentMessage]]:
    """After the step's last call: finish the run or continue (memgpt: with a heartbeat)."""
    agent = rt.require()
    calls = cp.pending
    refused = all(c.refused for c in calls)
    base = attrs.evolve(
        cp,
        iteration=cp.iteration + 1,
        pending=(),
        step_id=None,
        allowed=None,
        prefill=(),
        invalid_steps=cp.invalid_steps + 1 if refused else 0,
        updated_at=rt.now(),
    )
    final = base.iteration >= base.max_steps
    uncalled = tools.solver.uncalled(base.tool_history)
    reason = None
    for c in calls:
        if c.terminal and c.status == "success":
            if final or not uncalled:
                return finish(rt, base, "end_turn" if c.name == "send_message" else "tool_rule"), []
            reason = expects(uncalled)  # Letta: required tools keep even a terminal call going
    if reason is None and base.invalid_steps >= rt.config.max_invalid_steps:
        return finish(rt, base, "invalid_tool_call"), []
    if reason is None and agent.agent_type == "memgpt_agent":
        paused = base.paused_until is not None and rt.now() < base.paused_until
        forced = any(c.name in tools and tools.tools[c.name].continues for c in calls)
        if any(c.status == "error" for c in calls):
            reason = FAILED_HEARTBEAT
        elif any(c.heartbeat for c in calls):
            reason = REQ_HEARTBEAT
        elif forced:
            reason = CONTINUE_HEARTBEAT
        if reason is None and uncalled:
            reason = expects(uncalled)
        if reason is None or (paused and not forced and not uncalled):
            return finish(rt, base, "end_turn"), []
    if final:
        return finish(rt, base, "max_steps"), []
    if reason is None:
        return base, []
    return base, [heartbeat_message(rt, reserve, reason, cp.session_id)]


def heartbeat_message(
    rt: AgentRuntime, reserve: Callable[[], tuple[str, int]], reason: str, run_id: str
) -> UserMessage:
    """The hidden user-role heartbeat that continues a run (Letta's shape)."""
    message_id, seq = reserve()
    content = json.dumps({"type": "heartbeat", "reason": reason, "time": rt.time_text()})
    return UserMessage(
        id=message_id,
        date=rt.now(),
        seq=seq,
        run_id=run_id,
        content=content,
        kind="heartbeat",
    )


@attrs.frozen
class CallResult:
    outcome: ToolOutcome
    returned: ToolReturnMessage
    extra: list[AgentMessage] = attrs.field(hash=False)
    checkpoint: SessionCheckpoint


async def run_call(rt: AgentRuntime, tools: ToolSet, call: PendingCall) -> CallResult:
    """Run one pending call of ``rt.session`` and commit its result (and, if it is the step's
    last, the end of the step)."""
    cp = rt.session
    assert cp is not None and cp.step_id is not None
    checked: Prepared | Refused | None = None
    if call.approval == "denied":
        result: Any = ToolOutcome(False, DENIED.format(reason=call.reason or "None"))
    elif call.client_return is not None:  # the client ran it and sent its result
        result = ToolOutcome(call.client_status != "error", call.client_return)
    else:
        checked = _check(rt, tools, cp, call)
        if isinstance(checked, Refused):
            result = ToolOutcome(False, checked.message)
        else:
            result = await run_tool(rt, checked)
            await rt.hazard("agent.tool_effect")  # the effect happened; its result is not stored
    return_id, return_seq = rt.new_id("message"), rt.alloc_seq()
    reserved: list[tuple[str, int]] = []
    last = len(cp.undone) == 1

    def heartbeat() -> tuple[str, int]:
        if not reserved:
            reserved.append((rt.new_id("message"), rt.alloc_seq()))
        return reserved[0]

    prepared = checked if isinstance(checked, Prepared) else None
    limit = prepared.tool.spec.return_char_limit if prepared else DEFAULT_RETURN_CHAR_LIMIT

    async def build(txn: Transaction) -> CallResult:
        outcome: ToolOutcome = await result(txn) if callable(result) else result
        returned = ToolReturnMessage(
            id=return_id,
            date=rt.now(),
            seq=return_seq,
            run_id=cp.session_id,
            step_id=cp.step_id,
            name=call.name,
            tool_return=package(outcome.ok, outcome.text, rt.time_text(), limit),
            status="success" if outcome.ok else "error",
            tool_call_id=call.id,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
        )
        done = attrs.evolve(
            call,
            done=True,
            status=returned.status,
            refused=isinstance(checked, Refused),
            heartbeat=prepared is not None and prepared.heartbeat,
            terminal=prepared is not None and prepared.tool.terminal,
        )
        new = cp.complete(done)
        if prepared is not None:
            new = new.bump("call_counts", signature(call.name, prepared.args)).bump(
                "tool_counts", call.name
            )
            new = attrs.evolve(
                new,
                tool_calls=new.tool_calls + 1,
                tool_history=(*new.tool_history, call.name),
                last_return=returned.tool_return,
            )
        if outcome.pause_minutes is not None:
            until = rt.now() + 60 * outcome.pause_minutes if outcome.pause_minutes else None
            new = attrs.evolve(new, paused_until=until)
        extra: list[AgentMessage] = []
        if last:
            new, extra = end_step(rt, tools, new, heartbeat)
        writes = [
            *outcome.writes,
            *rt.message_writes([returned, *extra]),
            *rt.checkpoint_writes(new),
        ]
        for key, value in writes:
            await (txn.delete(key) if value is None else txn.set(key, value))
        return CallResult(outcome, returned, extra, new)

    try:
        done = await rt.commit(build, f"the result of tool call {call.id}")
    except Exception:
        if isinstance(result, ToolOutcome) and any(k.startswith(IMAGES) for k, _ in result.writes):
            await rt.close_sandbox()  # its files are not saved: back to the last image
        raise
    for apply in done.outcome.after:
        apply()
    rt.remember([done.returned, *done.extra])
    rt.session = done.checkpoint
    return done
