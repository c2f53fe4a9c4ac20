"""agent_ownership: children named through an agent that does not own them. The scenario
passes and repeats its trace; every two-id route of the app is probed or named shared; the
oracle names hand-made bad answers."""

from __future__ import annotations

import re

from fastapi.routing import APIRoute

from kelpie_agent.api._app import shared_app
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads.agent_ownership import (
    PROBES,
    SHARED,
    Cancel,
    OwnershipLog,
    Probe,
    check_cancels,
    check_ownership,
)


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_ownership")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["ownership.probes"] == 2 * len(PROBES)
    assert first.result.trace_hash == again.result.trace_hash


def test_every_two_id_route_is_probed_or_named_shared() -> None:
    probed = {route for _, route, *_ in PROBES}
    two_ids = {
        r.path
        for r in shared_app().routes
        if isinstance(r, APIRoute) and len(re.findall(r"\{\w+\}", r.path)) >= 2
    }
    unjudged = sorted(two_ids - probed - set(SHARED))
    assert not unjudged, f"two-id routes neither probed nor named shared: {unjudged}"
    assert not set(SHARED) - two_ids, "SHARED names a route the app no longer has"


def test_the_oracle_names_a_foreign_child_served_and_a_changed_agent() -> None:
    log = OwnershipLog()
    log.probes = [
        Probe("GET /x/{id}", "agent-a", "agent-b", "conv-1", 404),
        Probe("POST /v1/runs/{run_id}/stream", "agent-a", "agent-b", "run-1", 200, frames=2),
    ]
    log.before = {"agent-b": {"passages": ["p-1"], "runs": []}}
    log.after = {"agent-b": {"passages": [], "runs": []}}
    problems = check_ownership(log)
    assert len(problems) == 2
    assert "streamed 2 message frames" in problems[0]
    assert "changed its ['passages']" in problems[1]
    log.probes, log.after = log.probes[:1], dict(log.before)
    assert check_ownership(log) == []


def test_the_cancel_oracle_names_a_run_not_reached_and_a_bystander_reached() -> None:
    cancel = Cancel("agent-a", ["run-a"], ["run-b"], ["run-s"], status=200)
    cancel.stops = {"run-a": "end_turn", "run-b": "cancelled", "run-s": "end_turn"}
    problems = check_cancels([cancel])
    assert len(problems) == 2
    assert "run-a ended 'end_turn'" in problems[0]
    assert "another agent's run run-b" in problems[1]
    cancel.stops = {"run-a": "cancelled", "run-b": "end_turn"}
    assert check_cancels([cancel]) == []
