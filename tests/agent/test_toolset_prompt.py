"""Pure parts of the loop: tool schemas and call checks, prompt building, rendering, codec."""

from __future__ import annotations

import json

import hypothesis.strategies as st
from hypothesis import given, settings

from kelpie_agent.agent import (
    AgentRecord,
    AssistantMessage,
    Block,
    LettaUsage,
    ReasoningMessage,
    SessionCheckpoint,
    ToolCallInfo,
    ToolCallMessage,
    ToolReturnMessage,
    ToolRule,
    UserMessage,
    builtin_by_name,
    letta_json,
    render_messages,
)
from kelpie_agent.agent._checkpoint import PendingCall
from kelpie_agent.agent._codec import Keys, pack, unpack
from kelpie_agent.agent._events import SendMessageExtractor
from kelpie_agent.agent._prompt import build_messages, render_memory, system_prompt
from kelpie_agent.agent._toolset import Prepared, Refused, ToolSet
from kelpie_agent.llm import LlmRequest, Tool, ToolCall
from kelpie_dst.shims.llm import check_api_rules

NAMES = ("send_message", "core_memory_append", "archival_memory_search", "memory_finish_edits")


def _toolset(agent_type: str, rules: tuple[ToolRule, ...] = ()) -> ToolSet:
    agent = AgentRecord(id="agent-1", name="a", agent_type=agent_type, tool_rules=rules)
    specs = [b.spec() for b in map(builtin_by_name, NAMES) if b is not None]
    return ToolSet(agent, specs)


def test_memgpt_tools_get_a_required_request_heartbeat_except_terminal_ones() -> None:
    tools = {t.name: t for t in _toolset("memgpt_agent").llm_tools()}
    for name in ("core_memory_append", "archival_memory_search"):
        assert "request_heartbeat" in tools[name].input_schema["properties"]
        assert tools[name].input_schema["required"][-1] == "request_heartbeat"
    for name in ("send_message", "memory_finish_edits"):
        assert "request_heartbeat" not in tools[name].input_schema["properties"]
    v1 = {t.name: t for t in _toolset("letta_v1_agent").llm_tools()}
    assert "request_heartbeat" not in v1["core_memory_append"].input_schema["properties"]


def test_react_agents_are_never_offered_memory_tools() -> None:
    assert _toolset("react_agent").names == ["send_message"]


def test_request_heartbeat_strings_are_accepted_and_stripped() -> None:
    tools = _toolset("memgpt_agent")
    args = {"label": "human", "content": "x", "request_heartbeat": "TRUE"}
    prepared = tools.prepare(ToolCall("t1", "core_memory_append", json.dumps(args)))
    assert isinstance(prepared, Prepared)
    assert prepared.heartbeat is True
    assert prepared.args == {"label": "human", "content": "x"}
    args["request_heartbeat"] = "false"
    again = tools.prepare(ToolCall("t2", "core_memory_append", json.dumps(args)))
    assert isinstance(again, Prepared) and again.heartbeat is False


def test_bad_calls_are_refused_with_a_one_line_reason() -> None:
    tools = _toolset("letta_v1_agent")
    cases = {
        ToolCall("a", "summon_kraken", "{}"): "there is no tool named 'summon_kraken' (available:",
        ToolCall("b", "core_memory_append", '{"label": '): "are not a JSON object: '{\"label\":'",
        ToolCall("c", "core_memory_append", "[1, 2]"): "are not a JSON object",
        ToolCall(
            "d", "core_memory_append", '{"label": "human"}'
        ): "'content' is a required property",
        ToolCall(
            "e", "core_memory_append", '{"label": 5, "content": "x"}'
        ): "at 'label': 5 is not of type 'string'",
        ToolCall(
            "f", "core_memory_append", '{"label": "h", "content": "x", "z": 1}'
        ): "Additional properties",
    }
    for call, expected in cases.items():
        refused = tools.prepare(call)
        assert isinstance(refused, Refused), call
        assert refused.message.startswith("invalid_tool_call: ")
        assert expected in refused.message, refused.message
        assert "\n" not in refused.message


def test_tool_rules_make_tools_terminal_or_limited() -> None:
    rules = (
        ToolRule("archival_memory_search", "exit_loop"),
        ToolRule("core_memory_append", "max_count_per_step", 2),
    )
    tools = _toolset("letta_v1_agent", rules)
    assert tools.tools["archival_memory_search"].terminal
    assert tools.tools["core_memory_append"].max_count == 2
    assert not tools.tools["send_message"].terminal  # terminal only for memgpt agents
    assert _toolset("memgpt_agent").tools["send_message"].terminal


# -- prompts ---------------------------------------------------------------------------------
def _history(draw: st.DrawFn) -> list[object]:
    """A plausible stored history: runs of user input, steps with text and tool calls, their
    results, heartbeats."""
    out: list[object] = []
    seq = 0
    calls = 0

    def nxt() -> int:
        nonlocal seq
        seq += 1
        return seq

    for turn in range(draw(st.integers(1, 6))):
        out.append(UserMessage(id=f"m{nxt()}", date=0.0, seq=seq, content=f"hello {turn}"))
        for step in range(draw(st.integers(0, 3))):
            sid = f"step-{turn}-{step}"
            if draw(st.booleans()):
                out.append(
                    ReasoningMessage(
                        id=f"m{nxt()}", date=0.0, seq=seq, step_id=sid, reasoning="hmm"
                    )
                )
            ids = []
            for _ in range(draw(st.integers(0, 2))):
                calls += 1
                ids.append(f"toolu_{calls}")
                info = ToolCallInfo("archival_memory_search", '{"query": "x"}', ids[-1])
                out.append(
                    ToolCallMessage(id=f"m{nxt()}", date=0.0, seq=seq, step_id=sid, tool_call=info)
                )
            for call_id in ids:
                out.append(
                    ToolReturnMessage(
                        id=f"m{nxt()}",
                        date=0.0,
                        seq=seq,
                        step_id=sid,
                        tool_return="{}",
                        status="success",
                        tool_call_id=call_id,
                    )
                )
            if ids and draw(st.booleans()):
                out.append(
                    UserMessage(
                        id=f"m{nxt()}",
                        date=0.0,
                        seq=seq,
                        content='{"type": "heartbeat"}',
                        kind="heartbeat",
                    )
                )
            if not ids:
                out.append(
                    AssistantMessage(id=f"m{nxt()}", date=0.0, seq=seq, step_id=sid, content="hi")
                )
    return out


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(10, 4000), st.booleans())
def test_any_window_of_any_history_makes_a_request_the_api_accepts(
    data: st.DataObject, budget: int, with_tools: bool
) -> None:
    history = data.draw(st.composite(_history)())
    tools = (
        [Tool("archival_memory_search", "", {"type": "object", "properties": {}})]
        if with_tools
        else []
    )
    messages = build_messages(history, budget_chars=budget, tools=tools)  # type: ignore[arg-type]
    request = LlmRequest("m", messages, "system", tools)
    assert check_api_rules(request) is None, (check_api_rules(request), messages)
    assert messages[0].role == "user"


def test_the_system_prompt_renders_blocks_and_memory_statistics() -> None:
    agent = AgentRecord(id="agent-1", name="a", system="Be kind.\n{CORE_MEMORY}\nThe end.")
    blocks = [Block(id="b1", label="human", value="Name: Ada", limit=100, description="the user")]
    text = system_prompt(
        agent, blocks, now="2026-01-01 12:00:00 AM UTC+0000", messages=7, passages=2
    )
    assert text.startswith("Be kind.\n<memory_blocks>")
    assert "<human>\n<description>\nthe user\n</description>" in text
    assert "- chars_current=9\n- chars_limit=100" in text
    assert "<value>\nName: Ada\n</value>\n</human>" in text
    assert "\nThe end." in text
    assert "7 previous messages" in text and "2 total memories" in text
    assert render_memory([]).endswith("</memory_blocks>")


# -- rendering, events, codec --------------------------------------------------------------------
def test_send_message_renders_as_an_assistant_message_and_hides_its_return() -> None:
    call = ToolCallMessage(
        id="m1", date=0.0, seq=1, tool_call=ToolCallInfo("send_message", '{"message": "Hi!"}', "t1")
    )
    ret = ToolReturnMessage(
        id="m2",
        date=0.0,
        seq=2,
        name="send_message",
        tool_return="{}",
        status="success",
        tool_call_id="t1",
    )
    shown = render_messages([call, ret])
    assert len(shown) == 1 and isinstance(shown[0], AssistantMessage)
    assert (shown[0].id, shown[0].content) == ("m1", "Hi!")
    assert render_messages([call, ret], use_assistant_message=False) == [call, ret]


def test_letta_json_has_the_sdk_shapes() -> None:
    ret = ToolReturnMessage(
        id="m2",
        date=1767225600.0,
        seq=2,
        tool_return="ok",
        status="error",
        tool_call_id="t1",
        stderr=("boom",),
    )
    assert letta_json(ret) | {} == {
        "id": "m2",
        "date": "2026-01-01T00:00:00+00:00",
        "message_type": "tool_return_message",
        "otid": None,
        "name": None,
        "run_id": None,
        "step_id": None,
        "seq_id": 2,
        "tool_return": "ok",
        "status": "error",
        "tool_call_id": "t1",
        "stdout": None,
        "stderr": ["boom"],
    }
    assert letta_json(LettaUsage(3, 4, 1)) == {
        "message_type": "usage_statistics",
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
        "step_count": 1,
    }


@settings(max_examples=300, deadline=None)
@given(st.text(), st.lists(st.integers(1, 7), min_size=1, max_size=60), st.booleans())
def test_the_send_message_text_streams_out_of_any_split_of_its_json(
    text: str, cuts: list[int], ascii_only: bool
) -> None:
    raw = json.dumps({"message": text, "request_heartbeat": False}, ensure_ascii=ascii_only)
    pieces, at = [], 0
    for cut in cuts:
        pieces.append(raw[at : at + cut])
        at += cut
    pieces.append(raw[at:])
    extractor = SendMessageExtractor()
    assert "".join(extractor.feed(p) for p in pieces) == text


def test_records_round_trip_through_msgpack() -> None:
    cp = SessionCheckpoint(
        session_id="run-1",
        agent_id="agent-1",
        max_steps=5,
        pending=(PendingCall("t1", "x", "{}", "m1"),),
        usage=LettaUsage(1, 2, 3),
        call_counts=(("b", 2), ("a", 1)),
    )
    assert unpack(pack(cp)) == cp
    agent = AgentRecord(
        id="agent-1",
        name="a",
        tags=("x",),
        metadata={"k": [1]},
        tool_rules=(ToolRule("t", "exit_loop"),),
    )
    assert unpack(pack(agent)) == agent
    ret = ToolReturnMessage(
        id="m", date=1.5, seq=9, tool_return="r", status="success", tool_call_id="t", stdout=("a",)
    )
    assert unpack(pack(ret)) == ret


def test_message_keys_sort_in_history_order() -> None:
    keys = Keys("agent-1")
    assert sorted([keys.message(300), keys.message(2), keys.message(17)]) == [
        keys.message(2),
        keys.message(17),
        keys.message(300),
    ]
    assert keys.message(1).startswith(keys.messages)
