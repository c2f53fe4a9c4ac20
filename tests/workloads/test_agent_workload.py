"""The agent workload end to end: shipped scenarios pass a few seeds (small), every LLM mode
works, the same seed gives the same trace hash (also in a fresh process), and the invariants
catch real violations: retries without an otid, and a tampered commit journal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

import kelpie_dst
from kelpie_dst.scenario import WorkloadContext, load_scenario, run_scenario
from kelpie_dst.workloads import agents as agent_workload
from kelpie_dst.workloads.agents import (
    Commit,
    Execution,
    Owner,
    check_exactly_once,
    check_single_activation,
)

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("workload.params.agents=3", "workload.params.messages=3", "workload.params.clients=2")
SCENARIOS = (
    "agent_chaos",
    "agent_crash_recovery",
    "network_partition",
    "llm_outage",
    "sandbox_chaos",
)


def _run(ref: str, seed: int, *overrides: str) -> Any:
    run = run_scenario(load_scenario(ref, [*SMALL, *overrides]), seed)
    return run


def _check(run: Any) -> None:
    failure = run.result.failure
    assert run.ok, f"{failure and failure.describe()}\n{run.replay_line()}"
    assert run.metrics["messages.acked"] == run.metrics["messages.planned"] == 9


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_agent_scenario_passes_a_seed(name: str) -> None:
    _check(_run(name, 7))


def test_the_direct_link_passes_too_and_differs_from_http() -> None:
    """The shipped scenarios go through HTTP; ``via=direct`` calls the dispatchers in-process
    (no service, no HTTP server): both keep every invariant, and they are different runs."""
    direct = _run("agent_chaos", 7, "workload.params.via=direct")
    _check(direct)
    assert direct.result.trace_hash != _run("agent_chaos", 7).result.trace_hash


def test_over_http_the_servers_answer_the_sdk_and_never_with_a_500() -> None:
    """Every attempt of the clients is an HTTP request that some server logged (or a
    connection that failed first); answers are 2xx, or 503 when a node could not reach the
    agent in time; never a 500."""
    run = _run("agent_chaos", 3)
    _check(run)
    answered = sum(n for key, n in run.metrics.items() if key.startswith("http."))
    assert run.metrics["http.2xx"] >= 3 + 9 + 3 * 3  # creates, sends, read-backs
    assert answered >= run.metrics["requests.attempts"] - run.metrics.get("requests.retries", 0)
    assert "http.500" not in run.metrics and "http.5xx" not in run.metrics


def test_agent_chaos_passes_a_few_seeds_with_its_faults_firing() -> None:
    fired: set[str] = set()
    for seed in (1, 2):
        run = _run("agent_chaos", seed)
        _check(run)
        fired |= set(run.result.faults_fired)
    domains = {f.split(".", 1)[0] for f in fired}
    assert {"process", "storage", "llm", "clock"} <= domains, fired


def _scenario(tmp_path: Path, llm: str, extra: str = "") -> str:
    path = tmp_path / "agents.toml"
    path.write_text(
        f"""
name = "agents_modes"
duration = "30s"
invariants = ["no_acknowledged_message_lost", "single_activation", "no_mixing_across_agents",
              "every_request_completed", "memory_blocks_within_limits", "streams_match_results",
              "tool_effects_exactly_once"]
[workload]
entry = "kelpie_dst.workloads.agents:agents"
params = {{ agents = 3, messages = 3, clients = 2 {extra} }}
[topology]
nodes = 2
database = "db"
sandbox = {{ enabled = true }}
{llm}
[faults.storage]
latency = 0.2
write_fail = 0.02
[faults.process.crash]
probability = 0.02
targets = ["node-1", "node-2"]
[liveness]
within = "3m"
"""
    )
    return str(path)


SCRIPT = """
[topology.llm]
mode = "scripted"
default = "ok"
[[topology.llm.rules]]
when = { tool = "run_code" }
text = "done: {text}"
[[topology.llm.rules]]
when = { user_regex = '(?P<tag>tag-a\\d+-m\\d+) \\w+ x' }
tool_calls = [{ name = "run_code", input = { code = "print('{tag} ran')", language = "python" } }]
"""


def test_a_scripted_model_from_the_scenario_drives_the_agents(tmp_path: Path) -> None:
    ref = _scenario(tmp_path, SCRIPT, ', agent_types = "letta_v1_agent", tools = "python"')
    run = run_scenario(load_scenario(ref), 3)
    assert run.ok, run.result.failure and run.result.failure.describe()
    assert run.metrics["tools.sandbox"] == 9 and run.metrics["stop.end_turn"] == 9


def test_an_adversarial_model_still_keeps_every_invariant(tmp_path: Path) -> None:
    llm = '[topology.llm]\nmode = "adversarial"\noptions = { p_invalid = 0.3, max_calls = 2 }'
    run = run_scenario(load_scenario(_scenario(tmp_path, llm)), 4)
    assert run.ok, run.result.failure and run.result.failure.describe()
    assert run.metrics["messages.acked"] == 9


def test_the_same_seed_gives_the_same_trace_hash_here_and_in_a_fresh_process() -> None:
    first, again = _run("agent_chaos", 5), _run("agent_chaos", 5)
    other = _run("agent_chaos", 6)
    assert first.result.trace_hash == again.result.trace_hash != other.result.trace_hash
    assert first.metrics == again.metrics
    sets = [arg for item in SMALL for arg in ("--set", item)]
    env = dict(os.environ, PYTHONHASHSEED="17", KELPIE_DST_NO_REEXEC="1")
    out = subprocess.run(
        [sys.executable, "-m", "kelpie_dst", "run", "agent_chaos", "--seed", "5", *sets],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    found = re.search(r"trace_hash=([0-9a-f]+)", out.stdout)
    assert found, out.stdout + out.stderr
    assert found.group(1) == first.result.trace_hash


def test_retries_without_an_otid_are_caught_as_duplicated_messages() -> None:
    """The planted bug: a client that retries a send without its otid. Under node crashes a
    send whose input was committed but whose answer was lost runs twice; the checker for
    acknowledged messages finds the input stored twice within three seeds."""
    for seed in (1, 2, 3):
        run = _run("agent_crash_recovery", seed, "workload.params.otids=false")
        if not run.ok:
            break
    assert run.result.exit_code == 1
    message = run.result.failure.message
    assert "no_acknowledged_message_lost" in message
    assert re.search(r"the input is stored [2-9] times", message), message


def test_a_tampered_journal_of_a_real_run_fails_the_checks() -> None:
    """On a real run's journal the checkers pass; making one committed write carry a stale
    owner (as an activation that kept writing after a takeover would) fails single
    activation, and an MCP call sent again after its result was stored fails exactly-once."""
    scenario = load_scenario("agent_crash_recovery", [*SMALL, "workload.params.tools=mcp,python"])
    journals = []

    async def main(sim: kelpie_dst.Simulation) -> None:
        ctx = WorkloadContext(sim, scenario)
        await agent_workload.agents(ctx)
        journals.append(ctx.state["world"].journal)

    result = kelpie_dst.run(main, seed=2, faults=scenario.faults_for(2), max_time=300)
    assert result.ok, result.failure and result.failure.describe()
    entries = journals[0].entries
    assert check_single_activation(entries) == []
    writes = [
        (i, e)
        for i, e in enumerate(entries)
        if isinstance(e, Commit) and e.agent_writes and e.fences and e.fences[0].owner
    ]
    assert len(writes) > 50
    position, commit = writes[len(writes) // 2]
    fence = commit.fences[0]
    assert fence.owner is not None
    stale = attrs.evolve(fence, owner=Owner(fence.owner.node, fence.owner.epoch - 1, "stale"))
    tampered = list(entries)
    tampered[position] = attrs.evolve(commit, fences=(stale, *commit.fences[1:]))
    [problem] = check_single_activation(tampered)
    assert "committed under" in problem and "stale" in problem

    executions = journals[0].executions
    assert executions and any(isinstance(e, Commit) and e.results for e in entries)
    assert check_exactly_once([], {}, entries, executions) == []
    repeat = Execution(len(entries), executions[0].tool, executions[0].note)
    [problem] = check_exactly_once([], {}, entries, [*executions, repeat])
    assert f"was sent again (entry {len(entries)})" in problem


def test_a_retry_of_a_run_longer_than_the_history_window_is_answered_with_that_run(
    tmp_path: Path,
) -> None:
    """Regression: the agent recognised a retried send (same otid) only while the run's first
    input was still in its in-memory history window (100 messages). A 34-step memgpt run is
    longer than that; the client times out after 15 s and retries on the other node, which
    then started the whole run again, timed out again, and so on forever."""
    path = tmp_path / "long.toml"
    path.write_text(
        """
name = "long_runs"
duration = "30s"
invariants = ["no_acknowledged_message_lost", "every_request_completed",
              "tool_effects_exactly_once"]
[workload]
entry = "kelpie_dst.workloads.agents:agents"
params.agents = 1
params.messages = 1
params.clients = 1
params.max_tool_steps = 45
params.max_steps = 50
params.attempt_timeout = 15.0
params.agent_types = "memgpt_agent"
params.tools = "mcp"
params.stream_fraction = 0.0
[topology]
nodes = 2
database = "db"
[[topology.mcp]]
name = "docs"
tools = ["lookup"]
[liveness]
within = "5m"
"""
    )
    run = run_scenario(load_scenario(str(path)), 1)
    assert run.ok, run.result.failure and run.result.failure.describe()
    assert run.metrics["requests.timeouts"] >= 1  # the send was retried mid-run
    assert run.metrics["tools.mcp"] > 30 and run.metrics["messages.acked"] == 1
