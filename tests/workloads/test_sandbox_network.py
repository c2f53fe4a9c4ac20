"""The ``agent_sandbox_network`` scenario: fetches from agents' sandboxes judged against their
allow-lists. The scenario passes and repeats its trace; the oracle's pattern rules follow
docs/sandbox.md, and it names hand-made bad logs."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads.sandbox_network import (
    TOOL,
    Fetch,
    NetworkLog,
    allowed,
    judge_fetches,
    tool_signature,
)

SMALL = ["workload.params.agents=2", "workload.params.messages=4"]


@pytest.mark.slow  # two runs of about a second each
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_sandbox_network", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["sandbox_network.fetches"] > 4
    assert first.result.trace_hash == again.result.trace_hash


def test_the_patterns_follow_the_documented_table() -> None:
    assert allowed(("api.example.com",), "api.example.com", 80)
    assert allowed(("API.Example.com",), "api.example.com", 443)
    assert not allowed(("api.example.com",), "www.example.com", 443)
    assert allowed(("*.example.com",), "www.example.com", 443)
    assert allowed(("*.example.com",), "v2.api.example.com", 443)
    assert not allowed(("*.example.com",), "example.com", 443)  # not the domain itself
    assert not allowed(("*.example.com",), "evilexample.com", 443)  # nor a look-alike
    assert allowed(("api.example.com:443",), "api.example.com", 443)
    assert not allowed(("api.example.com:443",), "api.example.com", 80)
    # the server's ceiling refuses what it does not name, whatever the agent's list says
    assert not allowed(("api.example.org",), "api.example.org", 443)
    assert not allowed(("data.example.org:8443",), "data.example.org", 8443)
    assert not allowed((), "api.example.com", 443)


def test_the_tool_is_the_last_public_function() -> None:
    assert tool_signature() == (TOOL, ["host", "port", "note"], ["host"])


def _log(*fetches: Fetch) -> NetworkLog:
    log = NetworkLog()
    log.agents = {0: "agent-0"}
    log.lists = {0: [("api.example.com",), (), ("*.example.com",)]}
    log.fetches = list(fetches)
    return log


def test_a_fetch_is_judged_by_the_list_in_force_or_a_later_one() -> None:
    ok = "200 api.example.com:443 sn-a0-m0-c1\n"
    refused = "Error executing function run_code: ExitCode: exit code 1: PermissionError: 403 x"
    good = _log(
        Fetch(0, 0, "api.example.com", 443, True, ok),
        Fetch(0, 1, "api.example.com", 443, False, refused),
        Fetch(0, 1, "www.example.com", 443, True, "200 www.example.com:443"),  # a later list
        Fetch(0, 2, "evilexample.com", 443, False, refused),
        Fetch(0, 2, "evilexample.com", 443, False, "SandboxCrashedError: gone"),  # not judged
    )
    assert judge_fetches(good) == []
    stale = _log(Fetch(0, 2, "evilexample.com", 443, True, "200 evilexample.com:443"))
    (problem,) = judge_fetches(stale)
    assert problem.startswith("a0 m2: evilexample.com:443 reached, though")
    kept_old = _log(Fetch(0, 2, "example.com", 443, True, "200 example.com:443"))
    assert judge_fetches(kept_old)  # m2's list (and none after it) names only *.example.com
    wrong_refusal = _log(Fetch(0, 2, "www.example.com", 443, False, refused))
    assert "was refused" in judge_fetches(wrong_refusal)[0]
    lying = _log(Fetch(0, 0, "api.example.com", 443, True, "200 elsewhere:1"))
    assert "succeeded with" in judge_fetches(lying)[0]
