"""Polls of agent state mid-run (``poll_interval``, scenarios/agent_storage_outage.toml): the
check of what a poll returned names each kind of wrong state, and the scenario passes and
repeats its trace."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_checks import BlockPlan
from kelpie_dst.workloads._agent_client import AgentPlan
from kelpie_dst.workloads._agent_polls import check_polled


def _plan(number: int) -> AgentPlan:
    marker = f"mark-a{number}-abcdef"
    blocks = (BlockPlan("persona", f"I am agent {number}. My marker is {marker}.", 100),)
    return AgentPlan(number, f"agent-{number}", "memgpt_agent", (), (), blocks, marker, {})


def _state(id: str, **values: tuple[str, int]) -> Any:
    blocks = [SimpleNamespace(label=k, value=v, limit=lim) for k, (v, lim) in values.items()]
    return SimpleNamespace(id=id, memory=SimpleNamespace(blocks=blocks), blocks=blocks)


def test_a_poll_of_the_right_agent_passes() -> None:
    a1, a2 = _plan(1), _plan(2)
    got = _state("srv-1", persona=(a1.blocks[0].value, 100))
    assert check_polled(got, "srv-1", a1, [a1, a2], "poll 1") == []


def test_wrong_agent_missing_or_foreign_marker_and_overfull_blocks_are_named() -> None:
    a1, a2 = _plan(1), _plan(2)
    assert "got agent srv-2" in check_polled(_state("srv-2"), "srv-1", a1, [a1, a2], "p")[0]
    lacking = check_polled(_state("srv-1", persona=("hi", 100)), "srv-1", a1, [a1, a2], "p")
    assert any("lacks the agent's marker" in p for p in lacking), lacking
    mixed = _state("srv-1", persona=(a1.blocks[0].value, 100), human=(a2.marker, 100))
    assert any("a2's marker" in p for p in check_polled(mixed, "srv-1", a1, [a1, a2], "p"))
    over = _state("srv-1", persona=(a1.blocks[0].value, 10))
    assert any("over its limit" in p for p in check_polled(over, "srv-1", a1, [a1, a2], "p"))


def test_polls_need_http() -> None:
    scenario = load_scenario(
        "agent_storage_outage", ["workload.params.via=direct", "workload.params.agents=1"]
    )
    got = run_scenario(scenario, 0)
    assert not got.ok and got.result.failure is not None
    assert "poll_interval: needs via = 'http'" in got.result.failure.describe()


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    small = ["workload.params.agents=1", "workload.params.messages=2", "duration=12s"]
    scenario = load_scenario("agent_storage_outage", small)
    first, again = run_scenario(scenario, 2), run_scenario(scenario, 2)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["polls"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


def test_polled_message_ids_out_of_history_order_are_named() -> None:
    from kelpie_dst.workloads._agent_checks import Msg
    from kelpie_dst.workloads._agent_polls import check_polled_order

    def msg(ident: str, seq: int, kind: str = "user_message") -> Msg:
        return Msg(id=ident, seq=seq, run_id=None, type=kind, text="")

    # read back in pages of two (seq counts within a page); m2 shown twice (reasoning, call)
    history = {
        "a1": [
            msg("m0", 0, "system_message"),
            msg("m1", 1),
            msg("m2", 0, "reasoning_message"),
            msg("m2", 1, "tool_call_message"),
            msg("m3", 0),
        ]
    }
    good = [("a1", "a1 poll 1", ("m0", "m1", "m2", "gone", "m3")), ("a1", "a1 poll 2", ("m0",))]
    assert check_polled_order(good, history) == []
    bad = [("a1", "a1 poll 3", ("m3", "m2", "m1", "m0"))]
    assert check_polled_order(bad, history) == [
        "a1 poll 3: message_ids lists m3 (listed 4 in the history) before m2 (listed 2)"
    ]
