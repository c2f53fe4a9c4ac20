"""Letta's tool rules in the loop: what the model is offered, what is refused, when the run
ends or goes on (run_first, exit_loop, continue_loop, conditional, constrain_child_tools,
parent_last_tool, required_before_exit, max_count_per_step), and the solver on its own."""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import pytest

from kelpie_agent.agent import (
    InvalidRequestError,
    ToolReturnMessage,
    ToolRule,
    ToolStore,
)
from kelpie_agent.agent._tool_rules import RuleSolver
from kelpie_agent.llm import LlmRequest
from kelpie_dst.shims import sim_ports
from kelpie_dst.shims.llm import Call, Reply

from .harness import check_history, create_agent, make_env, node_kv, say


@attrs.define
class PlanPolicy:
    """Calls the planned tools in order, one per step (``{"n": step}`` or the planned args),
    records what it was offered, then answers ``done``."""

    plan: list[tuple[str, dict[str, Any]]]
    offered: list[list[str]] = attrs.field(factory=list)
    step: int = 0

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        self.offered.append(sorted(t.name for t in request.tools))
        if self.step >= len(self.plan):
            return ("done",)
        name, args = self.plan[self.step]
        self.step += 1
        return (Call(name, args),)


async def _tools(*names: str) -> list[str]:
    store = ToolStore(node_kv(), sim_ports())
    ids = []
    for name in names:
        spec = await store.create(f"def {name}(n: int) -> str:\n    return str(n)\n")
        ids.append(spec.id)
    return ids


def _returns(result: Any) -> list[ToolReturnMessage]:
    return [m for m in result.messages if isinstance(m, ToolReturnMessage)]


@pytest.mark.dst(seeds=2, guards="strict")
async def test_run_first_offers_only_its_tool_and_prefills_its_args() -> None:
    kv = node_kv()
    ids = await _tools("a", "b")
    policy = PlanPolicy([("b", {"n": 1}), ("a", {"n": 1}), ("b", {"n": 2})])
    rules = (ToolRule("a", "run_first", args={"n": 42}),)
    actor, view = await create_agent(make_env(policy), kv, tools=ids, tool_rules=rules)
    result = await say(actor, "go")
    assert policy.offered[0] == ["a"]  # only the run_first tool at the start
    first, second, third = _returns(result)
    assert first.status == "error" and "[ToolConstraintError] Cannot call b" in first.tool_return
    assert json.loads(second.tool_return)["message"] == "42"  # the rule's args win
    assert third.status == "success"
    assert set(policy.offered[2]) == {"a", "b"}  # after the first call, everything
    await check_history(kv, view.agent.id)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_child_rules_restrict_the_next_tool_and_keep_the_loop_going() -> None:
    kv = node_kv()
    ids = await _tools("a", "b", "c")
    rules = (
        ToolRule("a", "constrain_child_tools", children=("b",), child_arg_nodes=(("b", {"n": 7}),)),
    )
    quiet = {"request_heartbeat": False}  # memgpt: no heartbeat asked for
    policy = PlanPolicy(
        [("a", {"n": 1, **quiet}), ("c", {"n": 1, **quiet}), ("b", {"n": 1, **quiet})]
    )
    actor, _ = await create_agent(
        make_env(policy), kv, agent_type="memgpt_agent", tools=ids, tool_rules=rules
    )
    result = await say(actor, "go", max_steps=6)
    returns = _returns(result)
    assert [r.status for r in returns[:3]] == ["success", "error", "success"]
    assert policy.offered[1] == ["b"]  # only the child after its parent
    assert json.loads(returns[2].tool_return)["message"] == "7"  # child args prefilled
    # memgpt without heartbeats: the child rule alone kept the loop going after "a"
    assert len(policy.offered) >= 3


@pytest.mark.dst(seeds=2, guards="strict")
async def test_conditional_picks_the_next_tool_from_the_output() -> None:
    kv = node_kv()
    ids = await _tools("check", "yes", "no")
    rules = (
        ToolRule(
            "check",
            "conditional",
            child_output_mapping={"1": "yes", "2": "no"},
            default_child="no",
        ),
    )
    policy = PlanPolicy([("check", {"n": 1}), ("yes", {"n": 0})])
    actor, _ = await create_agent(make_env(policy), kv, tools=ids, tool_rules=rules)
    await say(actor, "go")
    assert policy.offered[1] == ["yes"]
    policy2 = PlanPolicy([("check", {"n": 5}), ("no", {"n": 0})])
    actor2, _ = await create_agent(make_env(policy2), kv, tools=ids, tool_rules=rules)
    await say(actor2, "go")
    assert policy2.offered[1] == ["no"]  # no mapping matched: the default child


@pytest.mark.dst(seeds=2, guards="strict")
async def test_parent_last_tool_hides_children_until_the_parent_ran() -> None:
    kv = node_kv()
    ids = await _tools("unlock", "open_door")
    rules = (ToolRule("unlock", "parent_last_tool", children=("open_door",)),)
    policy = PlanPolicy([("open_door", {"n": 1}), ("unlock", {"n": 1}), ("open_door", {"n": 2})])
    actor, _ = await create_agent(make_env(policy), kv, tools=ids, tool_rules=rules)
    result = await say(actor, "go")
    assert policy.offered[0] == ["unlock"]
    assert policy.offered[2] == ["open_door"]
    assert [r.status for r in _returns(result)] == ["error", "success", "success"]


@pytest.mark.dst(seeds=2, guards="strict")
async def test_required_before_exit_keeps_the_run_going_until_the_tool_ran() -> None:
    kv = node_kv()
    ids = await _tools("log")
    rules = (ToolRule("log", "required_before_exit"),)

    # letta_v1: a plain answer first, which must not end the run while "log" is uncalled
    class Late(PlanPolicy):
        def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
            self.offered.append(sorted(t.name for t in request.tools))
            if len(self.offered) == 1:
                return ("done",)
            if len(self.offered) == 2:
                return (Call("log", {"n": 1}),)
            return ("really done",)

    late = Late([])
    actor, view = await create_agent(make_env(late), kv, tools=ids, tool_rules=rules)
    result = await say(actor, "go")
    assert result.stop_reason == "end_turn"
    assert len(late.offered) == 3  # the early answer did not end it
    beats = [m for m in result.messages if getattr(m, "kind", None) == "heartbeat"]
    assert any("ToolRuleViolated: You must call log" in m.content for m in beats)
    await check_history(kv, view.agent.id)


@pytest.mark.dst(seeds=2, guards="strict")
async def test_exit_loop_and_max_count_through_the_allowed_set() -> None:
    kv = node_kv()
    ids = await _tools("tick", "stop")
    rules = (ToolRule("tick", "max_count_per_step", 2), ToolRule("stop", "exit_loop"))
    policy = PlanPolicy(
        [("tick", {"n": 1}), ("tick", {"n": 2}), ("tick", {"n": 3}), ("stop", {"n": 0})]
    )
    actor, _ = await create_agent(make_env(policy), kv, tools=ids, tool_rules=rules)
    result = await say(actor, "go")
    assert result.stop_reason == "tool_rule"
    assert "tick" not in policy.offered[2]  # used up
    assert [r.status for r in _returns(result)] == ["success", "success", "error", "success"]


def test_rules_refuse_bad_definitions_with_one_line() -> None:
    with pytest.raises(InvalidRequestError, match="children"):
        ToolRule("a", "constrain_child_tools")
    with pytest.raises(InvalidRequestError, match="child_output_mapping"):
        ToolRule("a", "conditional")
    with pytest.raises(InvalidRequestError, match="not in children"):
        ToolRule("a", "constrain_child_tools", children=("b",), child_arg_nodes=(("c", {}),))
    with pytest.raises(InvalidRequestError, match="type must be one of"):
        ToolRule("a", "whenever")


def test_solver_intersects_rules_and_falls_back_to_every_tool() -> None:
    rules = [
        ToolRule("a", "constrain_child_tools", children=("b", "c")),
        ToolRule("x", "parent_last_tool", children=("c",)),
        ToolRule("b", "max_count_per_step", 1),
    ]
    solver = RuleSolver(rules, ["a", "b", "c", "x"])
    assert solver.allowed([], None) == frozenset({"a", "b", "x"})  # c needs x first
    assert solver.allowed(["a"], None) == frozenset({"b"})  # children of a, minus c
    assert solver.allowed(["b", "a"], None) is None  # b used up, c hidden: empty -> all
    assert solver.uncalled(["a"]) == []
    assert RuleSolver([ToolRule("q", "required_before_exit")], ["q"]).uncalled([]) == ["q"]
