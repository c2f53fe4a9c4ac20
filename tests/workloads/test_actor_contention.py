"""The actor_contention scenario and its checks: it passes and repeats its trace; the
bounded-waiting check names a starved request, the tally check a double count."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._contention_checks import (
    Ack,
    contention_at_most_once,
    contention_requests_complete,
    contention_waits_bounded,
)


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("actor_contention", ["workload.params.requests=6"])
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["contention.acks"] == 2 * 3 * 6
    assert first.result.trace_hash == again.result.trace_hash


def test_the_pauses_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("actor_contention_pauses", ["workload.params.requests=5"])
    first, again = run_scenario(scenario, 2), run_scenario(scenario, 2)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["contention.acks"] == 2 * 3 * 5
    assert first.result.trace_hash == again.result.trace_hash


def test_the_patience_scenario_passes_repeats_and_its_callers_give_up() -> None:
    """Callers that give up and resend: a request given up on before it started is not an
    unknown outcome, so running it anyway is a second run their callers were never told of."""
    scenario = load_scenario("actor_contention_patience", ["workload.params.requests=8"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["contention.acks"] == 2 * 3 * 8
    assert first.metrics["contention.gave_up"] > 0
    assert first.result.trace_hash == again.result.trace_hash


def _ctx(acks: list[Ack], **state: Any) -> Any:
    return SimpleNamespace(params={"wait_leases": 2.0}, state={"acks": acks, "lease": 6.0, **state})


def test_a_request_that_waited_past_the_bound_is_named() -> None:
    fine = Ack("n1/0/0", "n1", 0.0, 11.9, 1)
    starved = Ack("n2/0/0", "n2", 1.0, 14.5, 2)
    contention_waits_bounded(_ctx([fine]))
    with pytest.raises(AssertionError, match=r"n2/0/0 \(on n2\) waited 13.5s"):
        contention_waits_bounded(_ctx([fine, starved]))


def test_an_unacknowledged_request_is_named() -> None:
    contention_requests_complete(_ctx([], left={"n1/0": 0}, pending={}))
    with pytest.raises(AssertionError, match="n1/0"):
        contention_requests_complete(_ctx([], left={"n1/0": 2}, pending={"n1/0/3": 4.0}))


def test_a_request_run_again_without_an_unknown_outcome_is_named() -> None:
    contention_at_most_once(_ctx([], executions={"a": 1, "b": 2}, unknown={"b": 1}))
    with pytest.raises(AssertionError, match="b ran 3 times, its caller was told of 1"):
        contention_at_most_once(_ctx([], executions={"a": 1, "b": 3}, unknown={"b": 1}))
