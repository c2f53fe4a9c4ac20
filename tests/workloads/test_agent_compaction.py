"""The compaction oracle and the simulated summarizer on fabricated requests and histories:
each passes what a correct agent does and catches a planted violation."""

from __future__ import annotations

import json

from kelpie_agent.llm import SUMMARIZER_SYSTEM, LlmRequest, Message, TextBlock
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.shims.llm import is_summary_request, summarize
from kelpie_dst.workloads._agent_checks import Msg
from kelpie_dst.workloads._agent_compaction import (
    ContextAuditor,
    check_context,
    check_summaries,
)


def _step(*texts: str) -> LlmRequest:
    messages = tuple(Message("user", (TextBlock(t),)) for t in texts)
    return LlmRequest("m", messages, "system mark-a1-x", (), 100)


def _summary_request(transcript: str) -> LlmRequest:
    turn = Message("user", (TextBlock(transcript),))
    return LlmRequest("m", (turn,), f"{SUMMARIZER_SYSTEM}\n\nSummarize.", (), 100)


def test_the_summarizer_quotes_every_user_message_and_keeps_earlier_quotes() -> None:
    first = summarize(
        _summary_request(
            "Messages to summarize:\n[user] tag-a1-m1 chat x0: kelp\n[assistant] done\n"
            "[user] tag-a1-m2 chat x0: tide"
        )
    )
    assert first.startswith("Summary of 3 messages.")
    assert "«tag-a1-m1 chat x0: kelp»" in first and "«tag-a1-m2 chat x0: tide»" in first
    second = summarize(
        _summary_request(f"Earlier summary:\n{first}\n\nMessages to summarize:\n[user] tag-a1-m3")
    )
    assert [q for q in ("tag-a1-m1", "tag-a1-m2", "tag-a1-m3") if q in second] == [
        "tag-a1-m1",
        "tag-a1-m2",
        "tag-a1-m3",
    ]
    assert is_summary_request(_summary_request("x")) and not is_summary_request(_step("x"))


def test_an_input_shown_once_must_stay_in_every_later_prompt() -> None:
    auditor = ContextAuditor()
    auditor.step(_step("tag-a1-m1 chat x0: kelp"), 1, "t=1")
    auditor.step(_step("tag-a1-m1 chat x0: kelp", "tag-a1-m2 chat x0: tide"), 1, "t=2")
    # compacted: m1 only in the summary's quotes, still shown
    summary = "Summary of 2 messages. The user said: «tag-a1-m1 chat x0: kelp»"
    auditor.step(_step(summary, "tag-a1-m2 chat x0: tide", "tag-a1-m3 chat x0: x"), 1, "t=3")
    assert auditor.problems == []
    # a prompt that lost m1 (dropped from the summary, or the summary left out)
    auditor.step(_step("tag-a1-m2 chat x0: tide", "tag-a1-m3 chat x0: x"), 1, "t=4")
    assert auditor.problems == [
        "t=4: a1's prompt lost input tag-a1-m1 (neither in context nor in the summary)"
    ]
    assert check_context({"tag-a2-m1"}, "tag-a2-m1 ...", 2) == []


def _msg(n: int, text: str) -> Msg:
    return Msg(f"message-{n}", n, None, "user_message", text)


def _alert(evicted: int) -> str:
    note = f"Note: prior messages ({evicted} of 9 total messages) have been hidden from view"
    return json.dumps({"type": "system_alert", "message": note})


def test_a_compaction_stored_twice_is_caught() -> None:
    good = [_msg(1, "tag-a1-m1"), _msg(2, _alert(1)), _msg(3, "x"), _msg(4, _alert(3))]
    assert check_summaries({"a1": good}) == []
    twice = [_msg(1, "tag-a1-m1"), _msg(2, _alert(1)), _msg(3, _alert(1))]
    (problem,) = check_summaries({"a1": twice})
    assert "summary message-3 evicts 1 messages" in problem and "stored twice" in problem


def test_the_compaction_scenario_compacts_and_repeats_itself() -> None:
    """agent_compaction summarizes every agent's context several times a seed, under crashes,
    and the same seed is the same run."""
    scenario = load_scenario("agent_compaction", ["workload.params.agents=3"])
    first, second = run_scenario(scenario, 3), run_scenario(scenario, 3)
    assert first.ok, f"{first.result.failure and first.result.failure.describe()}"
    assert first.metrics["compaction.agents"] == 3
    assert first.metrics["compaction.summaries"] >= 6
    assert first.metrics["messages.acked"] == first.metrics["messages.planned"] == 24
    assert first.result.trace_hash == second.result.trace_hash
