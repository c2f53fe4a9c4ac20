"""The agent_approvals scenario: approvals and denials answered across crashes. It passes, is
deterministic, and its oracle names each kind of broken answer."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_approval_checks import ApprovalLog, Request, check


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_approvals", ["workload.params.requests=2"])
    first, again = run_scenario(scenario, 2), run_scenario(scenario, 2)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["approvals.requests"] == 6
    assert first.result.trace_hash == again.result.trace_hash


def _request(key: str, approve: bool, sent: float | None, acked: float | None) -> Request:
    return Request(key, "agent-1", approve, False, "done", "toolu_1", False, sent, acked)


def test_the_oracle_names_each_broken_answer() -> None:
    log = ApprovalLog(tool="pay")
    log.requests += [
        _request("a0r0", True, 1.0, 2.0),  # ran once in between: fine
        _request("a0r1", False, 3.0, 4.0),  # denied, yet ran
        _request("a0r2", True, 5.0, 6.0),  # ran before its answer, and after its result
        _request("a0r3", True, 7.0, 8.0),  # approved, never ran
        _request("a0r4", True, None, None),  # never answered, yet ran
    ]
    log.executed += [("a0r0", 1.5), ("a0r1", 3.5), ("a0r2", 4.5), ("a0r2", 6.5), ("a0r4", 9)]
    log.executed.append(("zz", 1.0))
    log.problems.append("a0r5: an approval for a stale call was accepted")
    log.executed.append(("note:a0r1", 3.7))  # the paired note of a0r1: fine
    assert check(log) == [
        "a0r5: an approval for a stale call was accepted",
        "pay ran for zz, which no client asked for",
        "a0r1: denied, yet pay ran 1 time(s)",
        "a0r2: a call ran at t=4.500, before the answer",
        "a0r2: a call ran again at t=6.500, after its answer was acknowledged at t=6.000",
        "a0r3: approved and answered, yet pay never ran",
        "a0r3: answered, yet note (no approval needed) never ran",
        "a0r4: pay or note ran before any answer was sent",
    ]


def test_the_legacy_answers_scenario_passes_and_repeats_its_trace() -> None:
    """agent_approvals_legacy (coreJ, session 14): half the answers in Letta's legacy form."""
    scenario = load_scenario("agent_approvals_legacy", ["workload.params.requests=2"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["approvals.requests"] == 6
    assert first.result.trace_hash == again.result.trace_hash
