"""The actor_contention scenario and its checks: it passes and repeats its trace; the
bounded-waiting check names a starved request, the tally check a double count, and the
turn-taking check a stale holder that acted after a newer activation."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._contention_checks import (
    Ack,
    Touch,
    contention_at_most_once,
    contention_lease_kept,
    contention_one_activation,
    contention_reads_fresh,
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


def test_the_storms_scenario_passes_repeats_and_its_activations_act_while_they_work() -> None:
    """Lease timings in kelpie_agent's default proportions, slow storage and clocks within the
    margin: the tally acts every tenth of a second while it works, so the turn-taking check
    has thousands of acts to judge, and leases were taken over (not only handed over)."""
    scenario = load_scenario("actor_contention_storms", ["workload.params.requests=4"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["contention.acks"] == 2 * 3 * 4
    assert first.metrics["contention.activations"] > 2
    assert first.metrics["contention.touches"] > 100
    assert first.result.trace_hash == again.result.trace_hash


def test_the_reads_scenario_passes_repeats_and_its_reads_wait_out_pauses() -> None:
    """Remote readers at random times; servers that freeze past the lease: some reads were sent
    to a frozen node and answered only when it thawed (by the lease's holder, never from the
    thawed node's memory)."""
    scenario = load_scenario("actor_contention_reads", ["workload.params.requests=10"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["contention.acks"] == 2 * 2 * 10
    assert first.metrics["contention.reads"] > 5
    assert first.metrics["contention.max_read_wait"] > 6.0  # one waited out a pause
    assert first.result.trace_hash == again.result.trace_hash


def test_the_activations_scenario_passes_repeats_and_activations_outlast_a_lease() -> None:
    """Every activate works longer than a lease (as a resume does): activations were made
    again and again, and each finished activating and served, under renewed leases."""
    scenario = load_scenario("actor_contention_activations", ["workload.params.requests=3"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["contention.acks"] == 2 * 2 * 3
    assert first.metrics["contention.activations"] > 2
    assert first.result.trace_hash == again.result.trace_hash


def _reads(reads: list[Ack], acks: list[Ack], *nodes: _Node, faults: tuple[str, ...] = ()) -> Any:
    state = {"reads": reads, "acks": acks, "margin": 1.0}
    return SimpleNamespace(sim=_sim(*nodes, faults=faults), state=state)


def test_a_read_older_than_an_acknowledged_count_is_named() -> None:
    acks = [Ack("n2/0/0", "n2", 1.0, 2.0, 7), Ack("n2/0/1", "n2", 2.0, 4.0, 8)]
    nodes = (_Node("n1", paused=(0.5, 10.0)), _Node("n2"))
    concurrent = Ack("read/n1/0/0", "n1", 3.0, 10.0, 7)  # sent before count 8 was acknowledged
    contention_reads_fresh(_reads([concurrent], acks, *nodes))
    stale = Ack("read/n1/0/1", "n1", 5.0, 10.0, 7)  # a pause is no excuse
    with pytest.raises(
        AssertionError,
        match=r"read/n1/0/1 on n1 \(issued t=5.000, answered t=10.000\) read 7, but n2/0/1 on "
        r"n2 had been acknowledged count 8 at t=4.000",
    ):
        contention_reads_fresh(_reads([concurrent, stale], acks, *nodes))
    contention_reads_fresh(_reads([stale], acks, *nodes, faults=("clock.jump",)))


class _Node:
    def __init__(self, name: str, paused: tuple[float, float] | None = None) -> None:
        self.name = name
        self.paused = paused
        self.clock = SimpleNamespace(offset=0.0)

    def paused_between(self, start: float, end: float) -> bool:
        return self.paused is not None and self.paused[0] <= end and self.paused[1] >= start


def _sim(*nodes: _Node, faults: tuple[str, ...] = ()) -> Any:
    return SimpleNamespace(nodes=list(nodes), faults=SimpleNamespace(active=dict.fromkeys(faults)))


def _turns(touches: list[Touch], sim: Any) -> Any:
    return SimpleNamespace(sim=sim, state={"touches": touches, "lease": 6.0, "margin": 1.0})


def test_a_stale_holder_acting_after_a_newer_activation_is_named() -> None:
    old, new, back = Touch(1.0, "n1", "a1", "r1"), Touch(5.0, "n2", "a2", "r2"), "a1"
    nodes = _sim(_Node("n1"), _Node("n2"))
    handed_over = [old, Touch(2.0, "n1", "a1", "r1"), new, Touch(9.0, "n1", "a3", "r3")]
    contention_one_activation(_turns(handed_over, nodes))
    stale = [old, new, Touch(5.5, "n1", back, "r1")]
    with pytest.raises(
        AssertionError,
        match=r"activation a1 on n1 acted for r1 at t=5.500, "
        r"after activation a2 on n2 had taken over \(acting from t=5.000\)",
    ):
        contention_one_activation(_turns(stale, nodes))


def test_a_thawed_node_and_jumping_clocks_are_excused() -> None:
    stale = [
        Touch(1.0, "n1", "a1", "r1"),
        Touch(5.0, "n2", "a2", "r2"),
        Touch(12.0, "n1", "a1", "r1"),
    ]
    contention_one_activation(_turns(stale, _sim(_Node("n1", paused=(2.0, 12.0)), _Node("n2"))))
    contention_one_activation(_turns(stale, _sim(_Node("n1"), _Node("n2"), faults=("clock.jump",))))
    skewed = _Node("n2")
    skewed.clock.offset = 1.0  # apart by the margin: the runtime promises nothing
    contention_one_activation(_turns(stale, _sim(_Node("n1"), skewed)))
    skewed.clock.offset = 0.9
    with pytest.raises(AssertionError, match="a1 on n1"):
        contention_one_activation(_turns(stale, _sim(_Node("n1"), skewed)))


def test_an_act_without_the_margin_left_on_its_stored_lease_is_named() -> None:
    """contention_lease_kept: the lease as stored at each act names the actor and has at
    least the margin left on the actor's own wall clock; a thawed node and jumping clocks are
    excused, acts recorded without the stored lease are not judged."""
    nodes = _sim(_Node("n1"), _Node("n2"))
    fine = [
        Touch(1.0, "n1", "a1", "r1", 100.0, "a1", 106.0),
        Touch(5.0, "n1", "a1", "r1", 104.0, "a1", 105.0),  # exactly the margin left
        Touch(6.0, "n2", "a2", "r2"),  # not recorded: not judged
    ]
    contention_lease_kept(_turns(fine, nodes))
    late = [Touch(5.5, "n1", "a1", "r1", 104.5, "a1", 105.0)]
    with pytest.raises(AssertionError, match=r"a1 on n1 acted for r1 at t=5.500 with 0.500s left"):
        contention_lease_kept(_turns(late, nodes))
    taken = [Touch(5.5, "n1", "a1", "r1", 104.5, "a2", 110.0)]
    with pytest.raises(AssertionError, match="while the stored lease named a2"):
        contention_lease_kept(_turns(taken, nodes))
    thawed = _sim(_Node("n1", paused=(1.0, 5.0)), _Node("n2"))
    contention_lease_kept(_turns(late + taken, thawed))
    contention_lease_kept(_turns(late + taken, _sim(_Node("n1"), faults=("clock.jump",))))


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
