"""The agent_mcp_servers scenario: managed MCP servers churned while their tool is called.
It passes, is deterministic, and its oracle names each kind of broken run."""

from __future__ import annotations

from typing import Any

import pytest

from kelpie_agent.mcp import McpServerConfig
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_mcp_servers import SECRET, Log, check, check_static


def _run(seed: int) -> Any:
    return run_scenario(load_scenario("agent_mcp_servers"), seed)


@pytest.mark.parametrize("seed", [0, 5])
def test_the_scenario_passes(seed: int) -> None:
    run = _run(seed)
    assert run.ok, run.result.failure and run.result.failure.describe()
    assert run.metrics["mcp.calls"] == 36
    assert 0 < run.metrics["mcp.executed"] < 36  # some calls met a deleted server


def test_the_same_seed_gives_the_same_trace_hash() -> None:
    first, again, other = _run(3), _run(3), _run(4)
    assert first.result.trace_hash == again.result.trace_hash != other.result.trace_hash


def test_several_crashing_nodes_pass_and_repeat_their_trace() -> None:
    crash = load_scenario("agent_mcp_servers_crash", ["workload.params.rounds=2"])
    first, again = run_scenario(crash, 2), run_scenario(crash, 2)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.result.trace_hash == again.result.trace_hash


def test_the_oracle_names_each_broken_run() -> None:
    log = Log(executed=[1, 2, 2, 3, 5], outcomes={1: ("success", True, 0, 0)})
    log.outcomes[4] = ("success", True, 0, 0)
    log.outcomes[3] = ("success", False, 1, 1)  # no record, none created while it ran
    log.outcomes[5] = ("success", False, 1, 2)  # a create started before it ran: fine
    log.ran_in.update({1: 0, 2: 0, 3: 1, 5: 2})
    log.configs.append(McpServerConfig("ticker", "t", env={"T": "****"}))
    log.configs.append(McpServerConfig("ticker", "t", env={"T": SECRET}))
    log.problems.append("round 0: refresh detached tool-x from the agent")
    found = check(log)
    assert found == [
        "round 0: refresh detached tool-x from the agent",
        "call 2 executed 2 times",
        "call 3 started with no server record, yet executed",
        "call 3 started with no server record, yet succeeded",
        "call 4 reported success but executed 0 times",
        "server started without its secret (args [])",
    ]


def test_rotation_passes_and_repeats_its_trace() -> None:
    """agent_mcp_rotation (session 11, sbxF): the secret alone rotates at each update."""
    scenario = load_scenario("agent_mcp_rotation")
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["mcp.rotation.versions"] == 4
    assert first.metrics["mcp.rotation.settled_calls"] > 0
    assert first.metrics["mcp.rotation.static_starts"] >= 2
    assert first.result.trace_hash == again.result.trace_hash


def test_the_rotation_oracle_names_each_broken_run() -> None:
    log = Log(executed=[1, 2], version=2)
    log.outcomes.update({n: ("success", True, 1, 1) for n in (1, 2)})
    log.outcomes[3] = ("error: McpArgumentError", True, 1, 1)
    log.ran_in.update({1: 1, 2: 1})
    log.ran_version.update({1: 2, 2: 1})
    log.sent_for[1] = (2, 5, 5, "success")  # ran on version 2: fine
    log.sent_for[2] = (2, 5, 5, "success")  # ran on the old process
    log.sent_for[3] = (2, 5, 5, "error: McpArgumentError")
    log.sent_for[4] = (2, 5, 6, "error: McpArgumentError")  # an update began meanwhile: fine
    log.configs.append(McpServerConfig("ticker", "t", env={"T": f"{SECRET}-v2"}))
    assert check(log) == [
        "call 2, sent after the update to secret version 2 took effect, ran on a process "
        "started with version 1's secret",
        "call 3 was refused for its arguments, which are valid for the tool as version 2 of "
        "the server lists it (the update and refresh returned)",
    ]


def test_the_static_config_oracle_names_a_server_started_wrong() -> None:
    log = Log(rotating=True)
    log.static_configs.append(McpServerConfig("atlas", "atlas", ("serve",)))
    assert check_static(log) == ["static mcp server 'clock' was never started"]
    wrong = McpServerConfig(
        "clock", "clock-server", ("-v", "--tz", "UTC"), {"TZ": "UTC", "API_KEY": "k1"}, "/srv/clock"
    )
    log.static_configs.append(wrong)
    [problem] = check_static(log)
    assert problem.startswith("static mcp server 'clock' started with ('clock-server', ('-v',")


def test_http_servers_pass_and_repeat_their_trace() -> None:
    """agent_mcp_servers_http (rtN, session 18): the ticker as a Streamable HTTP server."""
    http = load_scenario("agent_mcp_servers_http")
    first, again = run_scenario(http, 1), run_scenario(http, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.result.trace_hash == again.result.trace_hash


def test_the_oracle_names_an_http_connection_without_its_headers() -> None:
    from kelpie_dst.workloads._agent_mcp_servers import AUTH_HEADER, CUSTOM_HEADERS, URL

    good = McpServerConfig.http("ticker", URL, {AUTH_HEADER: SECRET, **CUSTOM_HEADERS})
    assert check(Log(configs=[good], http=True)) == []
    bare = McpServerConfig.http("ticker", URL)
    wrong = McpServerConfig.http("ticker", URL, {AUTH_HEADER: "****", **CUSTOM_HEADERS})
    problems = check(Log(configs=[bare, wrong], http=True))
    assert len(problems) == 2 and all("not its record's secrets" in p for p in problems)
