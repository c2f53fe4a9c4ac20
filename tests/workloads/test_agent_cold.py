"""The cold-restart oracle: the pure comparison names hand-made differences and leaves alone
what it cannot judge; over HTTP the walk restarts every node and is judged; the same seed gives
the same trace."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_cold import ColdLog, check_cold

AGENT = {"id": "agent-1", "name": "a", "tags": ["x", "y"], "memory": {"blocks": [{"v": "1"}]}}


def _log(before: dict, after: dict, *, restarted: bool = True) -> ColdLog:
    return ColdLog(before=before, after=after, rounds=2, settled=True, restarted=restarted)


def test_equal_answers_pass() -> None:
    path = "/v1/agents/agent-1"
    assert check_cold(_log({path: (200, AGENT)}, {path: (200, dict(AGENT))})) == []


def test_a_changed_field_is_named_by_its_path() -> None:
    path = "/v1/agents/agent-1"
    after = {**AGENT, "memory": {"blocks": [{"v": "2"}]}}
    [problem] = check_cold(_log({path: (200, AGENT)}, {path: (200, after)}))
    assert path in problem and ".memory.blocks[0].v" in problem and '"1"' in problem


def test_a_missing_field_an_order_and_a_status_are_differences() -> None:
    one, two, three = "/v1/a", "/v1/b", "/v1/c"
    before = {one: (200, AGENT), two: (200, [1, 2]), three: (200, {})}
    after = {one: (200, {k: v for k, v in AGENT.items() if k != "tags"})}
    after |= {two: (200, [2, 1]), three: (404, {"detail": "gone"})}
    problems = check_cold(_log(before, after))
    assert len(problems) == 3
    assert ".tags only before the restart" in problems[0]
    assert "[0]: 1 before the restart, 2 after" in problems[1]
    assert "200 before the restart, 404 after" in problems[2]


def test_unanswered_paths_and_a_run_that_never_restarted_are_not_judged() -> None:
    path = "/v1/a"
    assert check_cold(_log({path: None}, {path: (200, 1)})) == []
    assert check_cold(_log({path: (200, 1)}, {path: None})) == []
    assert check_cold(_log({path: (200, 1)}, {}, restarted=False)) == []


def test_over_http_every_node_restarts_and_the_walk_is_judged() -> None:
    scenario = load_scenario("agent_api_surface")
    assert scenario.workload.params["cold_restart"] is True
    assert "cold_restart_changes_nothing" in scenario.invariant_names
    run = run_scenario(scenario, 0)
    assert run.result.failure is None, run.result.failure
    metrics = run.metrics
    assert metrics["cold.restarted"] == 1 and metrics["cold.settled"] == 1
    assert metrics["cold.paths"] > 40  # the collections and four items of each kind
    again = run_scenario(scenario, 0)
    assert again.result.trace_hash == run.result.trace_hash


def test_two_routes_showing_one_thing_differently_are_named() -> None:
    from kelpie_dst.workloads._agent_cold import check_views

    run = {"id": "run-1", "status": "completed", "stop_reason": "end_turn"}
    stale = {**run, "status": "running"}
    answers = {"/v1/runs/": (200, [stale]), "/v1/runs/run-1": (200, run), "/v1/x": None}
    [problem] = check_views(answers, "before")
    assert "run-1" in problem and ".status" in problem and "/v1/runs/" in problem
    # the same id in another shape (another field set) or as another message type is another
    # view; equal views pass
    summary = {"id": "run-1", "status": "running"}
    assert check_views({"/v1/a": (200, [summary]), "/v1/runs/run-1": (200, run)}, "x") == []
    one = {"id": "message-1", "message_type": "reasoning_message", "reasoning": "hm"}
    two = {"id": "message-1", "message_type": "assistant_message", "reasoning": "x"}
    assert check_views({"/v1/m": (200, [one, two]), "/v1/n": (200, [one])}, "x") == []
