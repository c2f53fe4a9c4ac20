"""agent_node_stops (rtN, session 18): graceful stops of server nodes, one otid sent to several
agents, and values at the documented limits through the server's default options. The scenario
passes and repeats its trace; the pure checks name hand-made bad runs."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_drain import SLACK, Stop, check_drains
from kelpie_dst.workloads._agent_limits import (
    LABEL_MAX,
    VALUE_CHARS,
    LimitsLog,
    _label,
    _value,
    check_limits,
)

SMALL = ["workload.params.agents=3", "workload.params.clients=3", "duration=30s"]


@pytest.mark.slow  # two runs of about 6 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_node_stops", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["graceful.stops"] >= 1
    assert first.metrics["limits.shown"] == 2
    assert first.metrics["limits.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _stop(**changes: object) -> Stop:
    stop = Stop("server-1", 1, 2.0, 10.0, 3, ended=12.0, state="stopped", open_after=0)
    stop.idle, stop.idle_closed = True, 0.001
    for name, value in changes.items():
        setattr(stop, name, value)
    return stop


def test_a_stop_within_its_grace_passes() -> None:
    assert check_drains([_stop(), _stop(ended=10.0), _stop(ended=12.0 + SLACK)]) == []
    # a crash or a freeze during the stop ends it another way: not judged
    assert check_drains([_stop(ended=30.0, crashed=True), _stop(ended=None)]) == []


def test_a_stop_past_its_grace_is_named() -> None:
    (problem,) = check_drains([_stop(ended=12.6)])
    assert "over its grace of 2.0s" in problem and "3 connection(s)" in problem


def test_a_stop_that_leaves_the_server_running_is_named() -> None:
    assert check_drains([_stop(state="stopping")])
    assert check_drains([_stop(open_after=1)])


def test_an_idle_connection_not_closed_at_once_is_named() -> None:
    assert "not closed" in check_drains([_stop(idle_closed=None)])[0]
    assert "1.500s after" in check_drains([_stop(idle_closed=1.5)])[0]
    assert check_drains([_stop(idle=False, idle_closed=None)]) == []


def test_the_limits_check_names_what_did_not_read_back() -> None:
    label, value = _label(LABEL_MAX), _value()
    assert len(label) == LABEL_MAX and len(value) == VALUE_CHARS
    good = LimitsLog()
    good.shown.append(("blocks.retrieve", label, label, value))
    good.refused.append(("a label of 101 characters", 422, False))
    assert check_limits(good) == []
    bad = LimitsLog()
    bad.shown.append(("blocks.retrieve", label, label[:-1], value[:-1]))
    bad.refused += [("a label of 101 characters", 200, True), ("dot", 500, False)]
    problems = check_limits(bad)
    assert len(problems) == 5, problems
    assert any("not the one sent" in p for p in problems)
    assert any("value of 19999 characters" in p for p in problems)
    assert any("answered 200" in p for p in problems)
    assert any("yet a block with its label exists" in p for p in problems)
