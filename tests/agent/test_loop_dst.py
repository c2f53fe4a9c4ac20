"""The loop's rules per agent type, and the failure modes of seed doc 004: empty answers,
repeated identical calls, budgets, answers without tools, pauses, rules, cancellation."""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    GetSession,
    ListMessages,
    LoopConfig,
    ToolReturnMessage,
    ToolRule,
    ToolStore,
    UserMessage,
    builtin_id,
)
from kelpie_agent.llm import LlmRequest
from kelpie_dst.shims import LlmTiming, ScriptedPolicy, sim_ports
from kelpie_dst.shims.llm import Call, Reply

from .harness import CountingPolicy, check_history, create_agent, make_env, node_kv, say


@attrs.define
class FixedPolicy:
    """Always the same reply."""

    reply: Reply

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        return self.reply


def _returns(result: Any, name: str | None = None) -> list[ToolReturnMessage]:
    return [
        m
        for m in result.messages
        if isinstance(m, ToolReturnMessage) and (name is None or m.name == name)
    ]


async def _tick_tool() -> str:
    spec = await ToolStore(node_kv(), sim_ports()).create(
        "def tick(n: int) -> int:\n    return n\n"
    )
    return spec.id


@pytest.mark.dst(seeds=3, guards="strict")
async def test_empty_answers_are_nudged_then_stop_with_invalid_llm_response() -> None:
    """An empty answer gets a hidden system alert and another try; after max_empty_responses
    tries the run stops with invalid_llm_response (never a crash, never an endless loop)."""
    kv = node_kv()
    actor, _ = await create_agent(make_env(FixedPolicy(())), kv)
    result = await say(actor, "hello?")
    assert result.stop_reason == "invalid_llm_response"
    assert result.usage.step_count == 3  # 1 + max_empty_responses (2)
    alerts = [m for m in result.messages if isinstance(m, UserMessage) and m.kind == "alert"]
    assert len(alerts) == 2 and "empty" in json.loads(alerts[0].content)["message"]


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_repeated_identical_call_runs_at_most_max_identical_calls_times() -> None:
    """The same tool with the same arguments runs 3 times per run; later copies are refused
    with a reason, and 3 steps of only refused calls stop the run with invalid_tool_call."""
    kv = node_kv()
    tick = await _tick_tool()
    actor, view = await create_agent(
        make_env(FixedPolicy((Call("tick", {"n": 7}),))), kv, tools=[tick]
    )
    result = await say(actor, "go")
    assert result.stop_reason == "invalid_tool_call"
    statuses = [m.status for m in _returns(result, "tick")]
    assert statuses == ["success"] * 3 + ["error"] * 3
    assert "repeated identical call" in _returns(result)[-1].tool_return
    await check_history(kv, view.agent.id)


@pytest.mark.dst(seeds=3, guards="strict")
async def test_the_tool_call_budget_caps_executions_per_run() -> None:
    """With max_tool_calls=5, exactly 5 calls run in a run; later ones are refused."""
    kv = node_kv()
    tick = await _tick_tool()
    env = make_env(CountingPolicy("tick", 50), config=LoopConfig(max_tool_calls=5))
    actor, _ = await create_agent(env, kv, tools=[tick])
    result = await say(actor, "go")
    ran = [m for m in _returns(result, "tick") if m.status == "success"]
    assert len(ran) == 5
    assert "budget exhausted" in _returns(result)[-1].tool_return
    assert result.stop_reason == "invalid_tool_call"


@pytest.mark.dst(seeds=3, guards="strict")
async def test_a_memgpt_answer_without_a_tool_is_nudged_then_stops_with_no_tool_call() -> None:
    """memgpt agents talk through send_message: plain text is their private reasoning. One
    reminder is sent; a second plain answer stops the run with no_tool_call."""
    kv = node_kv()
    actor, _ = await create_agent(
        make_env(FixedPolicy(("just thinking",))), kv, agent_type="memgpt_agent"
    )
    result = await say(actor, "hi")
    assert result.stop_reason == "no_tool_call"
    kinds = [m.message_type for m in result.messages]
    assert kinds == ["user_message", "reasoning_message", "user_message", "reasoning_message"]


PAUSER = {
    "mode": "scripted",
    "rules": [
        {"when": {"tool": "send_message"}, "text": "(idle)"},
        {
            "when": {"user": "pause"},
            "tool_calls": [
                {"name": "pause_heartbeats", "input": {"minutes": 10, "request_heartbeat": True}}
            ],
        },
        {
            "when": {"user": "forever"},
            "tool_calls": [
                {
                    "name": "pause_heartbeats",
                    "input": {"minutes": 100000, "request_heartbeat": True},
                }
            ],
        },
        {
            "when": {"tool": "core_memory_append"},
            "tool_calls": [{"name": "send_message", "input": {"message": "saved"}}],
        },
        {
            "when": {"user": "save"},
            "tool_calls": [
                {
                    "name": "core_memory_append",
                    "input": {"label": "human", "content": "x", "request_heartbeat": True},
                }
            ],
        },
    ],
}


@pytest.mark.dst(seeds=3, guards="strict")
async def test_pause_heartbeats_ends_the_run_and_suppresses_heartbeats_until_it_expires(
    dst: kelpie_dst.Simulation,
) -> None:
    """pause_heartbeats stops the loop even though a heartbeat was requested; while paused, a
    requested heartbeat is ignored (the run ends after that step); the pause is in the
    checkpoint, capped at 360 minutes, and heartbeats work again once it expires."""
    kv = node_kv()
    actor, _ = await create_agent(
        make_env(ScriptedPolicy.from_dict(PAUSER)),
        kv,
        agent_type="memgpt_agent",
        tools=[builtin_id(n) for n in ("send_message", "pause_heartbeats", "core_memory_append")],
    )
    result = await say(actor, "pause please")
    assert result.stop_reason == "end_turn" and result.usage.step_count == 1
    assert "Pausing timed heartbeats for 10 min" in _returns(result)[0].tool_return
    session = await actor.handle(GetSession())
    assert session.paused_until == pytest.approx(dst.wall_time() + 600)
    paused = await say(actor, "save this")
    assert paused.usage.step_count == 1 and paused.reply == ""  # heartbeat ignored
    await trio.sleep(601)
    resumed = await say(actor, "save this again")
    assert resumed.usage.step_count == 2 and resumed.reply == "saved"
    capped = await say(actor, "forever")
    assert "for 360 min" in _returns(capped)[0].tool_return


@pytest.mark.dst(seeds=3, guards="strict")
async def test_tool_rules_and_memory_finish_edits_end_the_run_with_tool_rule() -> None:
    """An exit_loop rule's tool, or memory_finish_edits, ends the run: stop reason tool_rule."""
    kv = node_kv()
    tick = await _tick_tool()
    env = make_env(CountingPolicy("tick", 10))
    actor, _ = await create_agent(
        env, kv, tools=[tick], tool_rules=(ToolRule("tick", "exit_loop"),)
    )
    result = await say(actor, "go")
    assert (result.stop_reason, len(_returns(result))) == ("tool_rule", 1)
    finisher = make_env(FixedPolicy((Call("memory_finish_edits", {}),)))
    actor2, _ = await create_agent(finisher, kv, tools=[builtin_id("memory_finish_edits")])
    assert (await say(actor2, "done?")).stop_reason == "tool_rule"


@pytest.mark.dst(seeds=3, guards="strict")
async def test_cancel_stops_between_steps_with_every_call_answered(
    dst: kelpie_dst.Simulation,
) -> None:
    """Setting the cancel event stops the run at the next step boundary with cancelled; the
    calls of the step in progress are all answered first."""
    kv = node_kv()
    tick = await _tick_tool()
    env = make_env(CountingPolicy("tick", 100), timing=LlmTiming(0.5, 1.0, 20.0))
    actor, view = await create_agent(env, kv, tools=[tick])
    cancel = trio.Event()

    async def later() -> None:
        await trio.sleep(dst.rng("test/cancel").uniform(0.5, 5.0))
        cancel.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(later)
        result = await say(actor, "go", cancel=cancel)
    assert result.stop_reason == "cancelled"
    await check_history(kv, view.agent.id)
    assert (await say(actor, "next", max_steps=2)).stop_reason == "max_steps"  # a new run


@pytest.mark.dst(seeds=3, guards="strict", faults=["llm.max_tokens=1.0"])
async def test_a_text_answer_cut_at_max_tokens_stops_with_max_tokens_exceeded() -> None:
    """A plain answer cut off at max_tokens ends the run with max_tokens_exceeded; a cut-off
    tool call is refused (its arguments are not JSON) and fed back, not executed."""
    kv = node_kv()
    actor, _ = await create_agent(make_env(FixedPolicy(("a long answer " * 20,))), kv)
    assert (await say(actor, "talk")).stop_reason == "max_tokens_exceeded"
    tick = await _tick_tool()
    actor2, _ = await create_agent(make_env(CountingPolicy("tick", 3)), kv, tools=[tick])
    result = await say(actor2, "go", max_steps=2)
    assert all(
        m.status == "error" and "not a JSON object" in m.tool_return for m in _returns(result)
    )


@pytest.mark.dst(seeds=3, guards="strict")
async def test_list_messages_pages_by_cursor_in_both_orders() -> None:
    """ListMessages: after/before are message ids (exclusive), order sorts, limit cuts; paging
    through with cursors visits every message exactly once."""
    kv = node_kv()
    actor, _ = await create_agent(make_env(FixedPolicy(("ok",))), kv)
    for n in range(7):
        await say(actor, f"m{n}")
    everything = await actor.handle(ListMessages(limit=1000, order="asc"))
    assert len(everything) == 15  # the system message, then 7 inputs and 7 replies
    assert everything[0].message_type == "system_message"
    pages, cursor = [], None
    while True:
        page = await actor.handle(ListMessages(limit=3, order="desc", before=cursor))
        if not page:
            break
        pages.extend(page)
        cursor = page[-1].id
    assert [m.id for m in pages] == [m.id for m in reversed(everything)]
    middle = await actor.handle(
        ListMessages(after=everything[2].id, before=everything[6].id, order="asc")
    )
    assert [m.id for m in middle] == [m.id for m in everything[3:6]]
