"""The agent under storage and LLM faults, and against a hostile model."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import kelpie_dst
from kelpie_agent.agent import (
    AgentStorageError,
    ListBlocks,
    LoopConfig,
    StreamEvent,
    ToolCallMessage,
    ToolReturnMessage,
    ToolStore,
    TurnResult,
    builtin_id,
)
from kelpie_dst.shims import AdversarialPolicy, LlmTiming, ScriptedPolicy, sim_ports

from .harness import (
    check_history,
    collect,
    create_agent,
    log_result,
    make_env,
    node_kv,
    say,
    stored_messages,
    stored_session,
)

MEMGPT_NOTES = {
    "mode": "scripted",
    "rules": [
        {"when": {"tool": "send_message"}, "text": "(idle)"},
        {
            "when": {"tool": "core_memory_append"},
            "tool_calls": [{"name": "send_message", "input": {"message": "noted"}}],
        },
        {
            "when": {"user_regex": r"note (?P<n>\w+)"},
            "tool_calls": [
                {
                    "name": "core_memory_append",
                    "input": {"label": "human", "content": "note-{n}", "request_heartbeat": True},
                },
            ],
        },
    ],
}
V1_NOTES = {
    "mode": "scripted",
    "rules": [
        {"when": {"tool": "memory_insert"}, "text": "noted"},
        {
            "when": {"user_regex": r"note (?P<n>\w+)"},
            "tool_calls": [
                {"name": "memory_insert", "input": {"label": "human", "new_string": "note-{n}"}},
            ],
        },
    ],
}


async def _turn(actor: Any, text: str, outcomes: list[str]) -> TurnResult | None:
    try:
        result = await say(actor, text)
    except AgentStorageError:
        outcomes.append("storage_error")
        return None
    outcomes.append(result.stop_reason)
    log_result(result)
    return result


@pytest.mark.dst(seeds=5, guards="strict", faults=["storage.write_fail=0.3"])
async def test_storage_write_failures_at_30_percent_succeed_or_fail_cleanly(
    dst: kelpie_dst.Simulation,
) -> None:
    """At 30% write failures (2 attempts per transaction, so many operations fail), every turn
    either completes or raises AgentStorageError; storage stays well-formed after each; every
    acknowledged turn's messages are all stored; once faults heal, the next turn finishes any
    interrupted run and nothing is left half-done."""
    kv = node_kv()
    env = make_env(ScriptedPolicy.from_dict(MEMGPT_NOTES), config=LoopConfig(storage_attempts=2))
    created = None
    while created is None:  # creating the agent may fail too: then it does not exist
        try:
            created = await create_agent(env, kv, agent_type="memgpt_agent")
        except AgentStorageError:
            continue
    actor, view = created
    outcomes: list[str] = []
    acknowledged: list[TurnResult] = []
    for n in range(8):
        result = await _turn(actor, f"note n{n}", outcomes)
        if result is not None:
            acknowledged.append(result)
        await check_history(kv, view.agent.id)
    dst.heal()
    final = await say(actor, "note last")
    assert final.stop_reason == "end_turn"
    stored = await check_history(kv, view.agent.id)
    ids = {m.id for m in stored}
    for result in acknowledged:
        assert {m.id for m in result.messages} <= ids | {
            m.id for m in result.messages if m.message_type == "assistant_message"
        }
        assert result.run_id in {m.run_id for m in stored}
    session = await stored_session(kv, view.agent.id)
    assert session is not None and not session.running
    kelpie_dst.log("outcomes", outcomes=outcomes)


@pytest.mark.dst(
    seeds=5, guards="strict", faults=["storage.write_fail=0.3", "llm.server_error=0.2"]
)
async def test_memory_tools_under_faults_apply_exactly_the_edits_they_report(
    dst: kelpie_dst.Simulation,
) -> None:
    """Memory edits and their tool results commit together: after any mix of storage and LLM
    failures, the human block is its initial value plus exactly the notes whose edit is stored
    as a success, in stored order, never twice (memgpt core_memory_append, letta_v1
    memory_insert)."""
    await _edits_exactly_as_reported(dst)


@pytest.mark.dst(seeds=5, guards="strict", faults=["storage.commit_unknown=0.4"])
async def test_a_memory_edit_whose_commit_outcome_is_unknown_is_applied_once(
    dst: kelpie_dst.Simulation,
) -> None:
    """A commit can apply and still fail (the connection drops before the answer). Retrying the
    edit's transaction would append the note twice (it reads the block it edits): the runtime
    reads back what the failed commit wrote first. Found by agent_chaos with the
    storage.commit_unknown fault (seeds 13 and 29 of the first sweep)."""
    await _edits_exactly_as_reported(dst)


async def _edits_exactly_as_reported(dst: kelpie_dst.Simulation) -> None:
    kv = node_kv()
    config = LoopConfig(storage_attempts=2, llm_retries=1)
    for agent_type, tool, script in (
        ("memgpt_agent", "core_memory_append", MEMGPT_NOTES),
        ("letta_v1_agent", "memory_insert", V1_NOTES),
    ):
        env = make_env(ScriptedPolicy.from_dict(script), config=config)
        created = None
        while created is None:
            try:
                created = await create_agent(env, kv, agent_type=agent_type)
            except AgentStorageError:
                continue
        actor, view = created
        outcomes: list[str] = []
        for n in range(6):
            await _turn(actor, f"note {agent_type[:2]}{n}", outcomes)
        dst.heal()
        await say(actor, f"note {agent_type[:2]}end")
        stored = await check_history(kv, view.agent.id)
        calls = {m.tool_call.tool_call_id: m for m in stored if isinstance(m, ToolCallMessage)}
        applied = [
            calls[m.tool_call_id].tool_call.arguments
            for m in stored
            if isinstance(m, ToolReturnMessage) and m.status == "success" and m.name == tool
        ]
        import json

        notes = [json.loads(a).get("content") or json.loads(a).get("new_string") for a in applied]
        [human] = [b for b in await actor.handle(ListBlocks()) if b.label == "human"]
        assert human.value == "\n".join(["The user.", *notes]), (human.value, notes)
        assert len(notes) == len(set(notes))
        kelpie_dst.log("memory", agent_type=agent_type, outcomes=outcomes, notes=notes)
        dst.faults.healed = False  # faults on again for the next agent type


HOSTILE_FAULTS = [
    "llm.malformed_tool_call=0.1",
    "llm.unknown_tool=0.1",
    "llm.max_tokens=0.05",
    "llm.stream_cut=0.1",
    "llm.rate_limited=0.05",
    "sandbox.crash=0.1",
    "sandbox.exec_timeout=0.05",
]


@pytest.mark.dst(seeds=5, guards="strict", faults=HOSTILE_FAULTS)
async def test_an_adversarial_model_never_crashes_the_loop(dst: kelpie_dst.Simulation) -> None:
    """A hostile model (unknown tools, schema-breaking arguments, malformed JSON, cut streams,
    truncated answers) with a crashing sandbox: every turn ends with a known stop reason, never
    an internal error, every request it made was one the API accepts, and storage stays
    well-formed."""
    kv = node_kv()
    tools = ToolStore(kv, sim_ports())
    custom = await tools.create(
        'def divide(a: float, b: float) -> float:\n    """Divide a by b."""\n    return a / b\n'
    )
    policy = AdversarialPolicy(p_text=0.1, p_unknown_tool=0.2, p_invalid=0.3, max_calls=3)
    env = make_env(policy, timing=LlmTiming(0.0, 0.1, 200.0), config=LoopConfig(tool_timeout=5.0))
    everything = [
        builtin_id(n)
        for n in (
            "send_message",
            "conversation_search",
            "conversation_search_date",
            "archival_memory_insert",
            "archival_memory_search",
            "core_memory_append",
            "core_memory_replace",
            "memory_replace",
            "memory_insert",
            "memory_rethink",
            "memory_finish_edits",
            "pause_heartbeats",
            "run_code",
        )
    ]
    for agent_type in ("memgpt_agent", "letta_v1_agent", "react_agent"):
        ids = [
            t
            for t in everything
            if agent_type != "react_agent"
            or t in (builtin_id("run_code"), builtin_id("send_message"))
        ]
        actor, view = await create_agent(env, kv, agent_type=agent_type, tools=[*ids, custom.id])
        for turn in range(6):
            send, receive = trio.open_memory_channel[StreamEvent](10_000)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect, receive)
                result = await say(
                    actor,
                    f"turn {turn}: do something",
                    max_steps=6,
                    stream=send,
                    stream_tokens=turn % 2 == 1,
                )
            assert result.stop_reason != "error", result.error
            assert "LlmBadRequestError" not in (result.error or ""), result.error
            log_result(result)
        await check_history(kv, view.agent.id)
    assert sum(dst.faults.fired.values()) > 0


@pytest.mark.dst(seeds=3, guards="strict", faults=["llm.server_error=1.0"])
async def test_llm_failure_becomes_llm_api_error_after_backed_off_retries(
    dst: kelpie_dst.Simulation,
) -> None:
    """An LLM that always fails: the call is tried 1 + llm_retries times with exponential,
    jittered backoff in virtual time, then the run stops with llm_api_error; the input stays
    stored and the agent keeps working once the LLM recovers."""
    kv = node_kv()
    env = make_env(
        ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "hi"}]}),
        config=LoopConfig(llm_retries=3, llm_backoff=1.0),
    )
    actor, view = await create_agent(env, kv)
    start = dst.now()
    result = await say(actor, "hello?")
    assert result.stop_reason == "llm_api_error"
    assert "LlmServerError after 4 attempt(s)" in (result.error or "")
    assert dst.faults.fired["llm.server_error"] == 4
    assert 3.5 <= dst.now() - start < 7.0  # 1+2+4 seconds, each times a jitter in [0.5, 1)
    stored = await stored_messages(kv, view.agent.id)
    assert [m.message_type for m in stored] == ["system_message", "user_message"]
    dst.heal()
    assert (await say(actor, "and now?")).reply == "hi"


@pytest.mark.dst(seeds=3, guards="strict", faults=["llm.rate_limited=1.0"])
async def test_rate_limits_are_waited_out_for_at_least_retry_after(
    dst: kelpie_dst.Simulation,
) -> None:
    """429s: each retry waits at least the provider's retry_after (2 s), then llm_api_error."""
    kv = node_kv()
    env = make_env(
        ScriptedPolicy.from_dict({"mode": "scripted", "rules": [{"text": "hi"}]}),
        config=LoopConfig(llm_retries=2, llm_backoff=0.1),
    )
    actor, _ = await create_agent(env, kv)
    start = dst.now()
    result = await say(actor, "hello?")
    assert result.stop_reason == "llm_api_error"
    assert dst.now() - start >= 4.0
