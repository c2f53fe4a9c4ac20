"""agent_directory: the cross-agent API areas (standalone blocks, tags, the tool catalog and
its search, messages across agents and their search, identities) through the SDK under
faults. The scenario passes and repeats its trace; the oracle names hand-made bad histories."""

from __future__ import annotations

import attrs
import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_directory_checks import (
    AgentSeen,
    BlockSeen,
    DirectoryLog,
    Hit,
    MadeTool,
    RunSeen,
    ToolSeen,
    Walk,
    check_directory,
    want_walk,
)

SMALL = [
    "workload.params.agents=3",
    "workload.params.messages=1",
    "workload.params.conversation_messages=1",
    "duration=30s",
]


@pytest.mark.slow  # two runs of about 8 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_directory", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["directory.listed"] > 50
    assert first.metrics["directory.hits"] > 0
    assert first.metrics["directory.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _log() -> DirectoryLog:
    """A consistent history: three agents, four blocks, two tools, three messages."""
    a1 = AgentSeen("agent-1", "agent-1", ("g0", "h1"), ("block-p1", "block-d1", "block-d2"))
    a2 = AgentSeen("agent-2", "agent-2", ("g1", "h1"), ("block-p2", "block-d2"), (), "max_steps")
    a3 = AgentSeen("agent-3", "agent-3", ("G2",), ("block-p3",), (), "end_turn")
    a1 = attrs.evolve(a1, last_stop_reason="end_turn")
    blocks = [
        BlockSeen("block-p1", "persona", "I am one", ""),
        BlockSeen("block-p2", "persona", "I am two", ""),
        BlockSeen("block-p3", "persona", "I am three", ""),
        BlockSeen("block-d0", "Dir-0", "plain note 0", "Directory block 0"),
        BlockSeen("block-d1", "Dir-1", "Kelp Forest note 1", "Directory block 1"),
        BlockSeen("block-d2", "Dir-2", "plain note 2", "Directory block 2"),
    ]
    tools = [
        ToolSeen("tool-s", "send_message", "letta_core"),
        ToolSeen("tool-0", "Kelp_Probe_0", "custom", ("kelp-0", "reef-0"), "... (v3) ..."),
        ToolSeen("tool-1", "Kelp_Probe_1", "custom", ("kelp-1", "reef-1"), "... (v3) ..."),
    ]
    log = DirectoryLog(agents=[a1, a2, a3], blocks=blocks, tools=tools)
    log.messages = [("m1", "user_message"), ("m2", "assistant_message"), ("m3", "user_message")]
    log.runs = [
        RunSeen("run-1", "agent-1", "completed", "end_turn", None, False),
        RunSeen("run-2", "agent-2", "failed", "max_steps", "conv-1", False),
        RunSeen("run-3", "agent-1", "completed", "end_turn", "conv-1", True),
    ]
    log.agent_models = {"agent-1": "anthropic/a", "agent-2": "anthropic/b"}
    log.models = ["anthropic/a", "anthropic/b", "anthropic/c"]
    log.made_blocks = {b.label: b for b in blocks[3:]}
    log.block_agents = {
        "block-d0": (),
        "block-d1": ("agent-1",),
        "block-d2": ("agent-2", "agent-1"),
    }
    log.made_tools = {
        t.name: MadeTool(t.name, t.id, t.tags, "(v3)") for t in tools if t.tool_type == "custom"
    }
    log.updated_tools = [("(v2)", attrs.evolve(tools[1], source="(v2)"))]
    log.identities = {"identity-a": {"agent-1"}, "identity-b": {"agent-2", "agent-3"}}
    log.tool_searches = [(("kelp-0", "reef-1"), False, ("tool-0", "tool-1"))]
    log.owners = {"m1": "agent-1", "m2": "agent-1", "m3": "agent-2"}
    log.threads = {"m1": "agent-1", "m2": "conv-1", "m3": "agent-2"}
    log.hits = [Hit("s", "m2", "agent-1", None, "conv-1"), Hit("s", "m3", "agent-2", "agent-2")]
    walks = [
        ("blocks", (("label_search", "dIR-"),)),
        ("blocks", (("connected_to_agents_count_lt", 2),)),
        ("blocks", (("connected_to_agents_count_eq", (0, 2)),)),
        ("tags", (("name", "g"),)),
        ("tools", (("search", "kelp_PROBE"),)),
        ("messages", (("include_return_message_types", ("user_message",)),)),
        ("agents", (("identity_id", "identity-b"), ("last_stop_reason", "end_turn"))),
        ("runs", (("agent_ids", ("agent-1",)), ("stop_reason", "end_turn"))),
        ("runs", (("background", False), ("conversation_id", "conv-1"))),
    ]
    for area, params in walks:
        for order in ("asc", "desc"):
            walk = Walk(area, params, order, 1, ())
            log.walks.append(attrs.evolve(walk, got=tuple(want_walk(log, walk))))
    return log


def _walk(log: DirectoryLog, area: str, order: str = "asc") -> Walk:
    return next(w for w in log.walks if w.area == area and w.order == order)


def test_a_consistent_history_passes_and_the_model_filters_as_documented() -> None:
    log = _log()
    assert check_directory(log) == []
    assert _walk(log, "blocks").got == ("block-d0", "block-d1", "block-d2")  # case-insensitive
    lt2 = next(w for w in log.walks if ("connected_to_agents_count_lt", 2) in w.params)
    assert "block-d2" not in lt2.got and "block-d0" in lt2.got  # two agents is not fewer than 2
    assert _walk(log, "tags").got == ("G2", "g0", "g1")  # code-point order, as sorted
    assert _walk(log, "agents").got == ("agent-3",)  # identity AND stop reason
    assert _walk(log, "messages", "desc").got == ("m3", "m1")


def test_a_filtered_page_that_misses_repeats_or_reorders_is_named() -> None:
    log = _log()
    bad = _walk(log, "blocks")
    log.walks[log.walks.index(bad)] = attrs.evolve(bad, got=("block-d0", "block-d2"))
    tags = _walk(log, "tags")
    log.walks[log.walks.index(tags)] = attrs.evolve(tags, got=("G2", "g0", "g0", "g1"))
    agents = _walk(log, "agents")
    log.walks[log.walks.index(agents)] = attrs.evolve(agents, got=("agent-1", "agent-3"))
    problems = check_directory(log)
    assert len(problems) == 3, problems
    assert problems[0].startswith("blocks (label_search=dIR-; asc, pages of 1): got")
    assert any("tags (name=g" in p for p in problems)
    assert any("identity_id=identity-b" in p for p in problems)


def test_lost_blocks_wrong_block_agents_and_stale_tools_are_named() -> None:
    log = _log()
    log.blocks = [b for b in log.blocks if b.id != "block-d0"]
    log.block_agents["block-d2"] = ("agent-2",)
    log.tools[1] = attrs.evolve(log.tools[1], tags=())
    log.updated_tools = [("(v2)", attrs.evolve(log.tools[1], source="(v1)"))]
    problems = check_directory(log)
    assert any("block Dir-0 (block-d0) was acknowledged but is not listed" in p for p in problems)
    assert any("block block-d2's agents: got ['agent-2']" in p for p in problems)
    assert any("tool Kelp_Probe_0: tags []" in p for p in problems)
    assert any("after a source-only update" in p for p in problems)
    assert any("an acknowledged update ((v2)) is not stored" in p for p in problems)


def test_runs_filters_and_the_models_list_against_the_model() -> None:
    log = _log()
    assert _walk(log, "runs").got == ("run-1", "run-3")
    assert next(w.got for w in log.walks if ("background", False) in w.params) == ("run-2",)
    runs = _walk(log, "runs", "desc")
    log.walks[log.walks.index(runs)] = attrs.evolve(runs, got=("run-3", "run-2", "run-1"))
    log.models = ["anthropic/b", "anthropic/b", "anthropic/c"]
    problems = check_directory(log)
    assert len(problems) == 3, problems
    assert "runs (agent_ids=('agent-1',), stop_reason=end_turn; desc" in problems[0]
    assert "is not each handle once, sorted" in problems[1]
    assert "lacks anthropic/a, the model of agent-1" in problems[2]


def test_a_tool_upserted_twice_under_two_ids_is_named() -> None:
    log = _log()
    log.tools.append(ToolSeen("tool-9", "Kelp_Probe_0", "custom", ("kelp-0", "reef-0"), "(v3)"))
    assert check_directory(log) != []


def test_tool_searches_by_tags_answer_exactly_the_tagged_tools() -> None:
    log = _log()
    log.tool_searches = [
        (("kelp-0", "reef-1"), False, ("tool-0",)),  # "any" read as "all": tool-1 missing
        (("kelp-1",), True, ("tool-0", "tool-1")),  # tool-0 has no kelp-1
    ]
    problems = check_directory(log)
    assert len(problems) == 2, problems
    assert "without a query" in problems[0]
    assert "['tool-0'] carry none of them" in problems[1]


def test_message_search_hits_of_another_agent_or_thread_are_named() -> None:
    log = _log()
    log.hits = [
        Hit("s", "m2", "conv-1", None, None),  # a conversation's id as its agent
        Hit("s", "m3", "agent-2", "agent-1"),  # outside the agent it was scoped to
        Hit("s", "m1", "agent-1", None, "conv-1"),  # outside the conversation
        Hit("s", "m9", "agent-1"),  # a message no history holds
    ]
    problems = check_directory(log)
    assert len(problems) == 4, problems
    assert "named conv-1's, but it is agent-1's" in problems[0]
    assert "is not agent-1's" in problems[1]
    assert "is in agent-1, not conv-1" in problems[2]
    assert "in no history read" in problems[3]


def test_a_failed_request_is_a_problem() -> None:
    log = _log()
    log.problems.append("directory: ConflictError: a tool named 'Kelp_Probe_0' already exists")
    assert check_directory(log) == log.problems
