"""agent_sessions: sessions handed from one agent to another through their actors, one of
them cut by a crash. The scenario passes and repeats its trace; the oracle names hand-made
bad histories."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads.agent_sessions import Pair, SessionLog, check_sessions


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_sessions")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["sessions.pairs"] == 3
    assert first.metrics["sessions.interrupted"] == 1  # the crash cut the last pair's run
    assert first.result.trace_hash == again.result.trace_hash


def _pair(**changes: object) -> Pair:
    pair = Pair(
        "agent-a",
        "agent-b",
        exported=[("UserMessage", "hi"), ("AssistantMessage", "noted")],
        exported_run="run-1",
        exported_stop="end_turn",
        source_ids={"m-1", "m-2"},
        target_before=["m-0"],
        target_after=[
            ("m-0", "SystemMessage", "sys"),
            ("m-3", "UserMessage", "hi"),
            ("m-4", "AssistantMessage", "noted"),
        ],
        target_again=["m-0", "m-3", "m-4"],
        answers=[("run-1", "end_turn"), ("run-1", "end_turn")],
        source_to="agent-b",
        target_from="agent-a",
        target_run="run-1",
    )
    for key, value in changes.items():
        setattr(pair, key, value)
    return pair


def test_a_consistent_history_passes() -> None:
    assert check_sessions(SessionLog([_pair()])) == []


def test_shared_ids_a_second_copy_and_a_cancelled_handover_are_named() -> None:
    shared = _pair(
        target_after=[("m-0", "SystemMessage", "sys"), *[("m-1", "UserMessage", "hi")]],
        target_again=["m-0", "m-1"],
    )
    [*problems] = check_sessions(SessionLog([shared]))
    assert any("source's message ids ['m-1']" in p for p in problems)
    twice = _pair(target_again=["m-0", "m-3", "m-4", "m-5"])
    assert any("second import" in p for p in check_sessions(SessionLog([twice])))
    cut = _pair(interrupted=True, answers=[("run-1", "cancelled"), ("run-1", "cancelled")])
    assert any("imports answered" in p for p in check_sessions(SessionLog([cut])))


def test_run_records_owned_by_another_agent_or_still_running_are_named() -> None:
    good = _pair(
        runs=[("agent-a", "run-1", "agent-a", "completed")],
        exported_record=("agent-a", "completed"),
    )
    assert check_sessions(SessionLog([good])) == []
    moved = _pair(
        runs=[("agent-a", "run-1", "agent-b", "completed")],
        exported_record=("agent-b", "completed"),
    )
    problems = check_sessions(SessionLog([moved]))
    assert any("listed under agent-a, is recorded as agent-b's" in p for p in problems)
    assert any("recorded as agent-b's, not its source's" in p for p in problems)
    stuck = _pair(runs=[], exported_record=("agent-a", "running"))
    assert any("still running" in p for p in check_sessions(SessionLog([stuck])))
    gone = _pair(runs=[], exported_record=None)
    assert any("has no record" in p for p in check_sessions(SessionLog([gone])))


def test_the_run_records_scenario_passes() -> None:
    result = run_scenario(load_scenario("agent_sessions_records"), 0)
    assert result.ok, result.result.failure and result.result.failure.describe()
