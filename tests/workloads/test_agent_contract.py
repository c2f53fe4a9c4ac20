"""agent_wire_contract: the wire's documented contract (the API key on every route, list
defaults and limits, streams with and without pings, refusals' statuses, the exact head limit)
under faults. The scenario passes and repeats its trace; the checks name hand-made bad logs."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_contract_checks import (
    AuthSeen,
    ContractLog,
    ListSeen,
    ScopeSeen,
    StatusSeen,
    StreamSeen,
    check_auth,
    check_limits,
    check_lists,
    check_refusals,
    check_streams,
)


@pytest.mark.slow  # two runs of a few seconds each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_wire_contract", ())
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["contract.auth_probes"] > 0
    assert first.metrics["contract.streams_judged"] > 0
    assert first.metrics["contract.refusals"] > 0
    assert first.result.trace_hash == again.result.trace_hash


def test_auth_problems_are_named() -> None:
    log = ContractLog()
    log.auth.append(AuthSeen("GET /v1/agents/", "no Authorization header", 401, 401, True, "false"))
    log.auth.append(AuthSeen("GET /v1/health/", "no Authorization header", 200, 200, True, None))
    log.auth.append(AuthSeen("GET /docs", "an empty key", 401, 0, False, None))  # no answer
    assert check_auth(log) == []
    log.auth.append(AuthSeen("PATCH /v1/blocks/b", "another key", 401, 200, False, None))
    log.auth.append(AuthSeen("GET /openapi.json", "Basic", 401, 401, False, "false"))
    log.auth.append(AuthSeen("GET /v1/agents/a", "none", 401, 401, True, "true"))
    log.not_applied.append("block b holds 'forged'")
    problems = check_auth(log)
    assert len(problems) == 4
    assert "answered 200, want 401" in problems[0]
    assert "without a JSON detail" in problems[1]
    assert "x-should-retry 'true'" in problems[2]


def test_list_and_status_problems_are_named() -> None:
    log = ContractLog()
    log.lists.append(ListSeen("runs default", ("r2", "r1"), ("r2", "r1")))
    log.statuses.append(StatusSeen("limit=1001", 422, 422))
    assert check_lists(log) == []
    log.lists.append(ListSeen("runs default", ("r2", "r1"), ("r1", "r2")))
    log.statuses.append(StatusSeen("limit=1000", 200, 422))
    problems = check_lists(log)
    assert len(problems) == 2 and "want [r2, r1]" in problems[0]
    log.limits.append(StatusSeen("head of 8192", 200, 200, closed=None))
    log.limits.append(StatusSeen("head of 8193", 431, 431, True, closed=False))
    assert check_limits(log) == ["head of 8193: a 431 that left the connection open"]
    log.refusals.append(StatusSeen("empty date range", 400, 422, True, retry="false"))
    log.refusals.append(StatusSeen("built-in delete", 400, 400, True, retry="true"))
    assert len(check_refusals(log)) == 2


def test_stream_problems_are_named() -> None:
    ended = ("stop_reason", "usage_statistics")
    log = ContractLog()
    log.streams.append(StreamSeen("s1", False, True, ended, ("m1",), ("m1",), "run-1"))
    log.streams.append(StreamSeen("s2", True, True, ended, ("m2",), None, None))
    log.streams.append(StreamSeen("s3", False, True, ("error",), (), None, None))
    assert check_streams(log) == []
    log.streams.append(StreamSeen("s4", False, True, (), (), ("m4",), "run-4"))
    log.streams.append(StreamSeen("s5", True, False, ended, ("m5",), ("m5", "m6"), "run-5"))
    problems = check_streams(log)
    assert len(problems) == 2
    assert "not stop_reason then usage_statistics" in problems[0]
    assert "run run-5 stored" in problems[1]


def test_a_list_scoped_to_one_agent_holds_only_its_items() -> None:
    log = ContractLog()
    log.scoped.append(ScopeSeen("GET /v1/steps/?agent_id=agent-a", "agent-a", ("agent-a",)))
    assert check_lists(log) == []
    log.scoped.append(
        ScopeSeen("GET /v1/runs/?agent_id=agent-a", "agent-a", ("agent-a", "agent-b"))
    )
    assert check_lists(log) == [
        "GET /v1/runs/?agent_id=agent-a: answered items of ['agent-b'], not only agent-a's"
    ]
