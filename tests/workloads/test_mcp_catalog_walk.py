"""agent_mcp_catalog (svcU, session 24): the catalog of managed MCP servers walked beside the
churned ticker. It passes and repeats; the walk's oracle names what it finds."""

from __future__ import annotations

from typing import Any

from kelpie_agent.mcp import McpServerConfig
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._mcp_catalog_walk import (
    SERVERS,
    CatalogLog,
    Routed,
    catalog_servers,
    check_catalog,
)


def _run(seed: int) -> Any:
    return run_scenario(load_scenario("agent_mcp_catalog"), seed)


def test_the_walk_runs_every_step_and_passes() -> None:
    run = _run(0)
    assert run.ok, run.result.failure and run.result.failure.describe()
    assert run.metrics["mcp.catalog.runs"] == 8
    assert run.metrics["mcp.catalog.refusals"] == 2
    assert run.metrics["mcp.catalog.problems"] == 0


def test_the_same_seed_gives_the_same_trace_hash() -> None:
    first, again = _run(2), _run(2)
    assert first.result.trace_hash == again.result.trace_hash


def test_the_oracle_names_an_unfinished_walk_and_a_run_twice() -> None:
    log = CatalogLog(executed=[("a_one", 7), ("b_one", 8), ("a_one", 7)])
    problems = check_catalog(log)
    assert problems == ["the catalog walk did not finish", "a_one ran twice for n=7"]
    log.done, log.executed = True, [("a_one", 7)]
    log.problems.append("cat-alpha answered for tool b_one")
    assert check_catalog(log) == ["cat-alpha answered for tool b_one"]


def test_the_walks_servers_are_reached_by_their_commands() -> None:
    fallback_saw: list[str] = []

    def fallback(config: McpServerConfig) -> str:
        fallback_saw.append(config.name)
        return "fallback"

    servers = catalog_servers(CatalogLog())
    assert sorted(servers) == sorted(command for command, _ in SERVERS.values())
    routed = Routed(fallback, servers)
    # a renamed server keeps its command, so it still reaches its own process
    assert routed(McpServerConfig("renamed", command="alpha-mcp")) is not None
    assert routed(McpServerConfig("ticker", command="ticker")) == "fallback"
    assert fallback_saw == ["ticker"]
