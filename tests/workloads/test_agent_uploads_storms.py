"""agent_uploads_storms: write storms with no restart after them. The scenario passes and
repeats its trace, and the uploads' model shows the workload each file tool result as it is
shown it (where the oracle checks that the tools named completed files only)."""

from __future__ import annotations

import random

from kelpie_agent.llm import LlmRequest, Message, ToolCall, ToolResult
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_upload_policy import FilesPolicy


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_uploads_storms", ["workload.params.uploads=8"])
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["uploads.acked"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


def test_the_policy_shows_each_tool_result_to_the_workload() -> None:
    seen: list[str] = []
    policy = FilesPolicy(seen.append)
    request = LlmRequest(
        model="m",
        messages=[
            Message("user", "grep KTOK0001Z"),
            Message("assistant", [ToolCall.of("c1", "grep_files", {"pattern": "KTOK0001Z"})]),
            Message("user", [ToolResult("c1", "Found in notes_1.txt")]),
        ],
    )
    assert policy.respond(request, random.Random(0)) == ("Those are the files I found.",)
    assert seen == ["Found in notes_1.txt"]
