"""Tool rules in the agent workload (_agent_rules): the model reads the limits from the prompt
Kelpie really renders, the offered-tools oracle flags exactly the tools a run has used up (and
never counts calls it cannot attribute to the run), and a run with rules on every agent keeps
every invariant, deterministically, with the rules checked."""

from __future__ import annotations

import random

from kelpie_agent.agent import Block, ToolRule
from kelpie_agent.agent._prompt import render_memory
from kelpie_agent.agent._tool_rules import rule_prompt
from kelpie_agent.llm import LlmRequest, Message, TextBlock, Tool, ToolCall, ToolResult
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_rules import (
    check_offered,
    draw_max_counts,
    prompt_max_counts,
    run_calls,
)

OK = '{"status": "OK", "message": "done"}'
FAILED = '{"status": "Failed", "message": "no"}'


def _system(rules: list[ToolRule]) -> str:
    value = rule_prompt(rules)
    assert value is not None
    blocks = [
        Block(id="b1", label="persona", value="mark-a1-xx", limit=100),
        Block(id="r", label="tool_usage_rules", value=value, limit=len(value), read_only=True),
    ]
    return render_memory(blocks)


def _request(offered: tuple[str, ...], *messages: Message) -> LlmRequest:
    tools = tuple(Tool(n, n, {"type": "object", "properties": {}}) for n in offered)
    return LlmRequest("m", messages, "", tools, 1000)


def _call(ident: str, name: str, text: str, result: str) -> tuple[Message, Message]:
    call = Message("assistant", (ToolCall(ident, name, f'{{"text": "{text}"}}'),))
    return call, Message("user", (ToolResult(ident, result),))


def test_the_model_reads_the_limits_from_the_rules_block_kelpie_renders() -> None:
    rules = [
        ToolRule("tally", "max_count_per_step", max_count_limit=2),
        ToolRule("run_code", "max_count_per_step", max_count_limit=1),
        ToolRule("send_message", "exit_loop"),
    ]
    assert prompt_max_counts(_system(rules)) == {"tally": 2, "run_code": 1}
    assert prompt_max_counts(render_memory([Block(id="b", label="p", value="x", limit=9)])) == {}


def test_a_tool_used_up_in_this_run_must_not_be_offered() -> None:
    directive = Message("user", (TextBlock("tag-a1-m2 custom x3: kelp"),))
    first = _call("c1", "tally", "tag-a1-m2 step 1", OK)
    second = _call("c2", "tally", "tag-a1-m2 step 2", OK)
    before = _request(("tally", "send_message"), directive, *first)
    assert check_offered(before, 1, {"tally": 2}, "t") == []
    after = _request(("tally", "send_message"), directive, *first, *second)
    assert run_calls(after) == {"tally": 2}
    [problem] = check_offered(after, 1, {"tally": 2}, "t=1")
    assert "offered tally after 2 successful call(s)" in problem
    hidden = _request(("send_message",), directive, *first, *second)
    assert check_offered(hidden, 1, {"tally": 2}, "t") == []


def test_calls_the_oracle_cannot_attribute_to_the_run_are_not_counted() -> None:
    """Failed calls, calls of an earlier run (another tag) and calls before the directive do
    not count: the oracle may undercount, never accuse a correct agent."""
    older = Message("user", (TextBlock("tag-a1-m1 custom x2: reef"),))
    old = _call("c0", "tally", "tag-a1-m1 step 1", OK)
    directive = Message("user", (TextBlock("tag-a1-m2 custom x3: kelp"),))
    failed = _call("c1", "tally", "tag-a1-m2 step 1", FAILED)
    stray = _call("c2", "tally", "tag-a1-m1 step 2", OK)  # another run's tag
    request = _request(("tally",), older, *old, directive, *failed, *stray)
    assert run_calls(request) == {}
    assert check_offered(request, 1, {"tally": 1}, "t") == []


def test_rules_are_drawn_per_agent_from_the_candidates() -> None:
    assert draw_max_counts(random.Random(1), 0.0, ["tally"]) == ()
    drawn = [draw_max_counts(random.Random(s), 1.0, ["tally", "run_code"]) for s in range(20)]
    assert all(1 <= len(d) <= 2 for d in drawn)
    assert {limit for d in drawn for _, limit in d} == {1, 2}
    assert drawn == [
        draw_max_counts(random.Random(s), 1.0, ["tally", "run_code"]) for s in range(20)
    ]


def test_agents_with_rules_keep_every_invariant_and_the_same_seed_replays() -> None:
    sets = [
        "workload.params.agents=3",
        "workload.params.messages=3",
        "workload.params.clients=2",
        "workload.params.tool_rules=1.0",
        "workload.params.tools=custom,python,memory",
        "workload.params.via=direct",
    ]
    first = run_scenario(load_scenario("agent_crash_recovery", sets), 3)
    failure = first.result.failure
    assert first.ok, f"{failure and failure.describe()}\n{first.replay_line()}"
    assert first.metrics["oracle.rule_checks"] > 0
    again = run_scenario(load_scenario("agent_crash_recovery", sets), 3)
    assert again.result.trace_hash == first.result.trace_hash
