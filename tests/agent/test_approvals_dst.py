"""Human in the loop: a tool that requires approval stops the run with requires_approval; the
client's approval, denial or own result (through the next message) finishes the step in a new
run, exactly once, across crashes; ordinary messages are refused while a call waits."""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    ApprovalDecision,
    ApprovalRequestMessage,
    GetSession,
    InputMessage,
    InvalidRequestError,
    PendingApprovalError,
    SendMessage,
    ToolReturnMessage,
    ToolRule,
    ToolStore,
    TurnResult,
    letta_json,
)
from kelpie_agent.llm import LlmRequest, ToolResult
from kelpie_dst.shims import LlmTiming, open_kv, sim_ports
from kelpie_dst.shims.llm import Call, Reply

from .harness import activate, check_history, create_agent, make_env, node_kv, say, stored_session


@attrs.define
class PayPolicy:
    """Calls ``pay`` (and ``note`` alongside); once results come back, answers with them."""

    calls: list[str] = attrs.field(factory=list)

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        last = request.messages[-1]  # tool results of this run come last
        results = [b for b in last.content if isinstance(b, ToolResult)]
        if results:
            return (f"result: {json.loads(results[-1].content)['message']}",)
        return (Call("pay", {"n": 5}), Call("note", {"n": 1}))


async def _setup(kv: Any, *, default: bool = False) -> tuple[Any, Any, list[str]]:
    store = ToolStore(kv, sim_ports())
    pay = await store.create("def pay(n: int) -> str:\n    return f'paid {n}'\n")
    note = await store.create("def note(n: int) -> str:\n    return f'noted {n}'\n")
    if default:
        await store.delete(pay.id)
        pay = await store.create(
            "def pay(n: int) -> str:\n    return f'paid {n}'\n", default_requires_approval=True
        )
    return pay, note, [pay.id, note.id]


async def _answer(actor: Any, *decisions: ApprovalDecision, otid: str = "ok-1") -> TurnResult:
    message = InputMessage("approval", "", otid=otid, approvals=decisions)
    result = await actor.handle(SendMessage((message,)))
    assert isinstance(result, TurnResult)
    return result


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_call_waits_for_approval_then_runs_once_approved() -> None:
    kv = node_kv()
    _, _, ids = await _setup(kv)
    env = make_env(PayPolicy())
    rules = (ToolRule("pay", "requires_approval"),)
    actor, view = await create_agent(env, kv, tools=ids, tool_rules=rules)
    stopped = await say(actor, "pay the bill")
    assert stopped.stop_reason == "requires_approval"
    requests = [m for m in stopped.messages if isinstance(m, ApprovalRequestMessage)]
    assert [r.tool_call.name for r in requests] == ["pay"]
    assert letta_json(requests[0])["message_type"] == "approval_request_message"
    assert not [m for m in stopped.messages if isinstance(m, ToolReturnMessage)]  # nothing ran
    with pytest.raises(PendingApprovalError):
        await say(actor, "hello?")
    call_id = requests[0].tool_call.tool_call_id
    done = await _answer(actor, ApprovalDecision(call_id, True))
    assert done.stop_reason == "end_turn"
    returns = {m.name: m for m in done.messages if isinstance(m, ToolReturnMessage)}
    assert json.loads(returns["pay"].tool_return)["message"] == "paid 5"
    assert returns["note"].status == "success"  # the call that needed no approval ran too
    assert "paid 5" in done.reply or "noted" in done.reply
    again = await _answer(actor, ApprovalDecision(call_id, True))  # a retry (same otid)
    assert again.run_id == done.run_id
    with pytest.raises(InvalidRequestError, match="No tool call is currently awaiting"):
        await _answer(actor, ApprovalDecision(call_id, True), otid="ok-2")
    await check_history(kv, view.agent.id)


@pytest.mark.dst(seeds=3, guards="strict")
async def test_denied_calls_return_the_reason_and_client_results_are_stored() -> None:
    kv = node_kv()
    _, _, ids = await _setup(kv, default=True)  # the tool itself requires approval
    actor, _ = await create_agent(make_env(PayPolicy()), kv, tools=ids)
    stopped = await say(actor, "pay")
    call_id = next(
        m.tool_call.tool_call_id for m in stopped.messages if isinstance(m, ApprovalRequestMessage)
    )
    with pytest.raises(InvalidRequestError, match="Invalid tool call IDs"):
        await _answer(actor, ApprovalDecision("toolu-wrong", True))
    denied = await _answer(actor, ApprovalDecision(call_id, False, "too expensive"))
    pay = next(m for m in denied.messages if isinstance(m, ToolReturnMessage) and m.name == "pay")
    assert pay.status == "error"
    assert "request to call tool denied. User reason: too expensive" in pay.tool_return
    stopped = await say(actor, "pay again")
    call_id = next(
        m.tool_call.tool_call_id for m in stopped.messages if isinstance(m, ApprovalRequestMessage)
    )
    own = ApprovalDecision(call_id, True, tool_return="paid by hand", status="success")
    given = await _answer(actor, own, otid="ok-3")
    pay = next(m for m in given.messages if isinstance(m, ToolReturnMessage) and m.name == "pay")
    assert json.loads(pay.tool_return)["message"] == "paid by hand"


@pytest.mark.dst(seeds=6, guards="strict")
async def test_an_approval_survives_a_crash_and_runs_the_call_once(
    dst: kelpie_dst.Simulation,
) -> None:
    """The answer is committed before anything runs; a node crash after that resumes the new
    run on the next activation, and the approved call's result is stored exactly once."""
    db = dst.add_node("db")
    kv = node_kv(host=db)
    _, _, ids = await _setup(kv)
    policy = PayPolicy()
    rules = (ToolRule("pay", "requires_approval"),)
    actor, view = await create_agent(make_env(policy), kv, tools=ids, tool_rules=rules)
    stopped = await say(actor, "pay")
    call_id = next(
        m.tool_call.tool_call_id for m in stopped.messages if isinstance(m, ApprovalRequestMessage)
    )
    agent_id = view.agent.id
    timing = LlmTiming(0.2, 0.5, 50.0)

    async def server(node: kelpie_dst.Node) -> None:
        env = make_env(policy, timing=timing)
        fresh = await activate(env, open_kv(node, host=db), agent_id, sim_ports(node))
        session = await fresh.handle(GetSession())
        if session.awaiting_approval:
            await _answer(fresh, ApprovalDecision(call_id, True))
        await trio.sleep_forever()

    node = dst.add_node("server", server)
    await trio.sleep(dst.rng("test/crash").uniform(0.0, 2.0))
    dst.crash(node)
    dst.restart(node, after=1.0)
    while True:
        session = await stored_session(kv, agent_id)
        if session is not None and not session.awaiting_approval and not session.running:
            break
        await trio.sleep(0.5)
    messages = await check_history(kv, agent_id)
    pays = [m for m in messages if isinstance(m, ToolReturnMessage) and m.name == "pay"]
    assert len(pays) == 1 and pays[0].status == "success"
