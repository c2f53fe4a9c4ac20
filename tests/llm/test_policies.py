"""SimLLM policies: scripted rules (and their errors), adversarial, helpful; JSON schemas."""

from __future__ import annotations

import random
import tomllib
from typing import Any

import pytest

from kelpie_agent.llm import LlmRequest, Message, Tool, ToolCall, ToolResult
from kelpie_dst.shims.llm import (
    AdversarialPolicy,
    Call,
    HelpfulPolicy,
    ScriptedPolicy,
    policy_from_dict,
)
from kelpie_dst.shims.llm._schema import example, instance, invalid_instance, validate

SCENARIO = """
[llm]
mode = "scripted"
default = "No script for that."

[[llm.rules]]
when = { user_regex = '(?i)my name is (?P<name>\\w+)' }
text = "Nice to meet you, {name}!"
[[llm.rules.tool_calls]]
name = "core_memory_append"
input = { label = "human", content = "Name: {name}", tags = ["{match}"] }

[[llm.rules]]
when = { tool = "core_memory_append" }
text = "Saved: {text} {{literally}}"

[[llm.rules]]
when = { tool_result = "error" }
text = "Something failed."

[[llm.rules]]
when = { user = "HELLO" }
text = "Hi."
"""
RNG = random.Random(0)
MEMORY = Tool(
    "core_memory_append",
    "Append to a memory block.",
    {
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "content": {"type": "string"},
            "request_heartbeat": {"type": "boolean"},
        },
        "required": ["label", "content", "request_heartbeat"],
    },
)


def scripted() -> ScriptedPolicy:
    policy = policy_from_dict(tomllib.loads(SCENARIO)["llm"])
    assert isinstance(policy, ScriptedPolicy)
    return policy


def req(*messages: Message, tools: tuple[Tool, ...] = (MEMORY,), system: str = "") -> LlmRequest:
    return LlmRequest("m", messages, system=system, tools=tools)


def test_scripted_rules_from_a_scenario_file() -> None:
    policy = scripted()
    first = policy.respond(req(Message.user("Hi, my name is Ada.")), RNG)
    assert first == (
        "Nice to meet you, Ada!",
        Call(
            "core_memory_append",
            {"label": "human", "content": "Name: Ada", "tags": ["my name is Ada"]},
        ),
    )
    call = ToolCall("toolu_1", "core_memory_append", "{}")
    history = (Message.user("my name is Ada"), Message("assistant", (call,)))
    after = req(*history, Message.tool_results(ToolResult("toolu_1", "OK")))
    assert policy.respond(after, RNG) == ("Saved: OK {literally}",)  # the user rule does not loop
    failed = req(*history, Message.tool_results(ToolResult("toolu_1", "an ERROR here")))
    assert policy.respond(failed, RNG) == ("Saved: an ERROR here {literally}",)  # first match wins
    assert policy.respond(req(Message.user("well hello")), RNG) == ("Hi.",)  # case-insensitive
    assert policy.respond(req(Message.user("weather?")), RNG) == ("No script for that.",)


def test_a_rule_without_when_always_matches() -> None:
    policy = ScriptedPolicy.from_dict({"rules": [{"text": "Always: {text}"}]})
    assert policy.respond(req(Message.user("x")), RNG) == ("Always: x",)


BAD: list[tuple[Any, str]] = [
    ({"mode": "oracle"}, "llm.mode: must be one of adversarial, helpful, scripted, got 'oracle'"),
    ("scripted", "expected a table with a 'mode'"),
    ({"mode": "scripted", "rule": []}, "unknown key 'rule'"),
    ({"mode": "scripted", "rules": "x"}, "rules: must be a list"),
    ({"mode": "scripted", "rules": [{"txt": "a"}]}, "rules[0]: unknown key 'txt'"),
    ({"mode": "scripted", "rules": [{"when": {"user": "a"}}]}, "rules[0]: answers with nothing"),
    ({"mode": "scripted", "rules": [{"when": {"usr": "a"}, "text": "b"}]}, "unknown key 'usr'"),
    (
        {"mode": "scripted", "rules": [{"when": {"user_regex": "(a"}, "text": "b"}]},
        "rules[0].when.user_regex: invalid regex '(a'",
    ),
    (
        {"mode": "scripted", "rules": [{"when": {"user": "a", "tool_result": "b"}, "text": "c"}]},
        "use one of",
    ),
    ({"mode": "scripted", "rules": [{"when": {"user": ""}, "text": "b"}]}, "non-empty string"),
    ({"mode": "scripted", "rules": [{"text": "hi {name}"}]}, "unknown placeholder {name}"),
    ({"mode": "scripted", "rules": [{"text": "a { b"}]}, "unbalanced brace"),
    ({"mode": "scripted", "rules": [{"tool_calls": [{"input": {}}]}]}, "tool_calls[0].name"),
    ({"mode": "scripted", "rules": [{"tool_calls": [{"name": "f", "input": 3}]}]}, ".input: must"),
    ({"mode": "scripted", "rules": [{"when": {"user": "a", "tool": "f"}, "text": "b"}]}, "'tool'"),
    ({"mode": "scripted", "default": ""}, "default: must be a non-empty string"),
    ({"mode": "adversarial", "p_text": 2}, "adversarial.p_text: must be within [0, 1]"),
    ({"mode": "adversarial", "max_calls": 0}, "adversarial.max_calls: must be an int >= 1"),
    ({"mode": "adversarial", "p_txt": 0.1}, "unknown key 'p_txt'"),
    ({"mode": "helpful", "x": 1}, "helpful: takes no options"),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_malformed_policies_raise_one_line_errors(data: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        policy_from_dict(data)
    assert message in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


SCHEMAS: list[dict[str, Any]] = [
    MEMORY.input_schema,  # type: ignore[list-item]
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 2, "maxLength": 10},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 5},
            "mode": {"enum": ["any", "all"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["query", "top_k"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_instances_are_valid_and_invalid_ones_are_not(schema: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    rng = random.Random(7)
    for _ in range(200):
        good = instance(schema, rng)
        assert validate(schema, good) == []
        jsonschema.validate(good, schema)
        bad = invalid_instance(schema, rng)
        if bad is None:
            assert not schema["properties"]  # only a schema that accepts every object
            continue
        assert validate(schema, bad)
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad), bad
    assert example(schema) == example(schema)


def test_adversarial_policy_is_mostly_valid_sometimes_not() -> None:
    tools = (MEMORY, Tool("search", "", SCHEMAS[1]))
    policy = AdversarialPolicy(p_text=0.1, p_unknown_tool=0.1, p_invalid=0.3, max_calls=3)
    rng = random.Random(3)
    counts = {"text": 0, "unknown": 0, "valid": 0, "invalid": 0}
    for _ in range(500):
        for item in policy.respond(req(Message.user("go"), tools=tools), rng):
            if isinstance(item, str):
                counts["text"] += 1
                continue
            tool = next((t for t in tools if t.name == item.name), None)
            if tool is None:
                counts["unknown"] += 1
            else:
                counts["invalid" if validate(tool.input_schema, dict(item.input)) else "valid"] += 1
    assert counts["valid"] > counts["invalid"] > 50, counts
    assert counts["unknown"] > 20 and counts["text"] > 20, counts
    text_only = policy.respond(req(Message.user("go"), tools=()), rng)
    assert len(text_only) == 1 and isinstance(text_only[0], str)


MEMGPT_TOOLS = (
    MEMORY,
    Tool(
        "archival_memory_search",
        "",
        {
            "type": "object",
            "properties": {"query": {"type": "string"}, "request_heartbeat": {"type": "boolean"}},
            "required": ["query", "request_heartbeat"],
        },
    ),
    Tool(
        "archival_memory_insert",
        "",
        {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]},
    ),
    Tool(
        "send_message",
        "",
        {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    ),
)


def helpful(*messages: Message, tools: tuple[Tool, ...] = MEMGPT_TOOLS, system: str = "") -> Any:
    return HelpfulPolicy().respond(req(*messages, tools=tools, system=system), RNG)


def test_helpful_policy_uses_memory_tools_and_send_message() -> None:
    name = helpful(Message.user("Hello! My name is grace."))
    assert name == (
        Call(
            "core_memory_append",
            {"label": "human", "content": "Name: Grace", "request_heartbeat": True},
        ),
    )
    assert helpful(Message.user("Remember that I like tea.")) == (
        Call("archival_memory_insert", {"content": "I like tea"}),
    )
    assert helpful(Message.user("What's my name?"), system="<human>\nName: Grace\n</human>") == (
        Call("send_message", {"message": "Your name is Grace."}),
    )
    search = helpful(Message.user("what is my name?"))
    assert search == (Call("archival_memory_search", {"query": "name", "request_heartbeat": True}),)
    recall = helpful(Message.user("Do you remember my favourite drink?"))
    assert recall[0].name == "archival_memory_search"
    assert recall[0].input["query"] == "my favourite drink"
    assert helpful(Message.user("hi"), tools=()) == ("Hello! How can I help you today?",)


def test_helpful_policy_answers_after_tool_results_and_heartbeats() -> None:
    call = ToolCall("toolu_1", "core_memory_append", "{}")
    history = (Message.user("my name is Grace"), Message("assistant", (call,)))
    result = Message.tool_results(ToolResult("toolu_1", '{"status": "OK", "message": "None"}'))
    expected = (Call("send_message", {"message": "Nice to meet you, Grace! I'll remember that."}),)
    assert helpful(*history, result) == expected
    heartbeat = Message.user('{"type": "heartbeat", "reason": "request_heartbeat == true"}')
    assert helpful(*history, result, heartbeat) == expected
    search = ToolCall("toolu_2", "archival_memory_search", "{}")
    asked = (Message.user("what is my name?"), Message("assistant", (search,)))
    found = Message.tool_results(ToolResult("toolu_2", '{"message": "The user\'s name is Grace."}'))
    assert helpful(*asked, found) == (Call("send_message", {"message": "Your name is Grace."}),)
    empty = Message.tool_results(ToolResult("toolu_2", "[]"))
    assert "couldn't find" in helpful(*asked, empty)[0].input["message"]
    sent = ToolCall("toolu_3", "send_message", "{}")
    done = (Message.user("hi"), Message("assistant", (sent,)))
    assert helpful(*done, Message.tool_results(ToolResult("toolu_3", "OK"))) == (
        "Is there anything else I can help with?",
    )
