"""The conversations oracles (``_agent_threads``) on hand-made histories and prompts: each
fires on the bug it is for and stays quiet on a correct run."""

from __future__ import annotations

import pytest

from kelpie_agent.llm import LlmRequest, Message, TextBlock
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_threads import (
    ThreadAck,
    ThreadAuditor,
    check_listing,
    check_threads,
    thread_of,
)

A = "agent-1"


def _acks() -> list[ThreadAck]:
    return [
        ThreadAck(A, "c0", 1, "tag-a1-c0-m1", "run-1"),
        ThreadAck(A, "c0", 2, "tag-a1-c0-m2", "run-2"),
        ThreadAck(A, "c1", 1, "tag-a1-c1-m1", "run-3"),
        ThreadAck(A, "c0f", 1, "tag-a1-c0f-m1", "run-4"),
    ]


def _histories() -> dict[tuple[str, str], list[str]]:
    return {
        (A, ""): ["tag-a1-m1", "tag-a1-m2"],
        (A, "c0"): ["tag-a1-c0-m1", "tag-a1-c0-m2"],
        (A, "c1"): ["tag-a1-c1-m1"],
        (A, "c0f"): ["tag-a1-c0-m1", "tag-a1-c0-m2", "tag-a1-c0f-m1"],
    }


FORKS = {(A, "c0f"): "c0"}
SHOWN = {a.tag for a in _acks()}


def test_thread_of_reads_the_workload_tags() -> None:
    assert thread_of("tag-a3-c1-m2 chat: kelp") == (3, "c1", "tag-a3-c1-m2")
    assert thread_of("tag-a3-c0f-m1 chat: kelp") == (3, "c0f", "tag-a3-c0f-m1")
    assert thread_of("tag-a3-m4 chat x0: kelp") == (3, "", "tag-a3-m4")
    assert thread_of("hello") is None


def test_a_correct_run_passes() -> None:
    assert check_threads(_acks(), _histories(), FORKS, SHOWN) == []


def test_an_input_in_the_wrong_thread_is_caught() -> None:
    histories = _histories()
    histories[(A, "c1")] = []
    histories[(A, "")] = [*histories[(A, "")], "tag-a1-c1-m1"]
    problems = check_threads(_acks(), histories, FORKS, SHOWN)
    assert any("c1: acknowledged inputs" in p for p in problems)
    assert any("tag-a1-c1-m1 of thread c1 is in own" in p for p in problems)


def test_a_fork_that_shares_its_source_is_caught() -> None:
    histories = _histories()
    histories[(A, "c0")] = [*histories[(A, "c0")], "tag-a1-c0f-m1"]
    problems = check_threads(_acks(), histories, FORKS, SHOWN)
    assert problems == ["agent-1: input tag-a1-c0f-m1 of thread c0f is in c0"]


def test_order_duplicates_and_unseen_inputs_are_caught() -> None:
    histories = _histories()
    histories[(A, "c0")] = ["tag-a1-c0-m2", "tag-a1-c0-m1", "tag-a1-c0-m1"]
    problems = check_threads(_acks(), histories, FORKS, SHOWN - {"tag-a1-c1-m1"})
    assert any("c0: acknowledged inputs" in p for p in problems)
    assert any("stored twice" in p for p in problems)
    assert "tag-a1-c1-m1: acknowledged, never shown to the model" in problems


def test_listing_checks() -> None:
    assert check_listing(["b", "a"], ["a", "b", "x"], ["x", "b", "a"]) == []
    assert check_listing(["a", "b"], ["a", "a", "b"], ["b", "a", "a"]) == ["listed twice: ['a']"]
    assert check_listing(["a", "b"], ["a"], ["a"]) == ["not listed: ['b']"]
    assert check_listing(["a", "b"], ["a", "b"], ["a", "b"]) != []
    # one request makes at most one conversation: a fork sent once, copied twice by a retry
    # inside the server, is caught even when a create's retry left room for one more
    made = {"a": "conv-c0", "b": "conv-c1", "x": None, "y": None}
    sent: dict[str | None, int] = {"conv-c0": 2, "conv-c1": 1, None: 1}
    listing = (["a", "b", "x"], ["a", "b", "x"], ["x", "b", "a"])
    assert check_listing(*listing, sent, made) == []
    assert check_listing(["a", "b"], ["a", "b", "x", "y"], ["y", "x", "b", "a"], sent, made) == [
        "2 conversations listed from 1 fork request(s) of the client (one request made more "
        "than one)"
    ]
    both = {**made, "b": "conv-c0"}  # two creates of one summary, from two attempts: allowed
    assert check_listing(*listing, sent, both) == []
    assert check_listing(*listing, {**sent, "conv-c0": 1}, both) == [
        "2 conversations listed from 1 create ('conv-c0') request(s) of the client (one "
        "request made more than one)"
    ]
    other = {**made, "b": "conv-of-another-agent"}
    assert check_listing(*listing, sent, other) == [
        "1 listed with summary 'conv-of-another-agent': no request made it"
    ]


def _request(*texts: str) -> LlmRequest:
    turns = tuple(Message("user", (TextBlock(t),)) for t in texts)
    return LlmRequest("m", turns, "system", (), 100)


def test_prompts_showing_two_threads_are_caught() -> None:
    auditor = ThreadAuditor()
    auditor.step(_request("tag-a1-c0-m1 chat: x", "tag-a1-c0f-m1 chat: y"), 1, "t1")
    auditor.step(_request("tag-a1-m1 chat x0: z"), 1, "t2")
    assert auditor.problems == []
    assert auditor.shown == {"tag-a1-c0-m1", "tag-a1-c0f-m1"}
    auditor.step(_request("tag-a1-m1 chat x0: z", "tag-a1-c1-m1 chat: w"), 1, "t3")
    auditor.step(_request("tag-a1-c0-m1 chat: x", "tag-a1-c1-m1 chat: w"), 1, "t4")
    assert auditor.problems == [
        "t3: a1's prompt shows the threads c1, own",
        "t4: a1's prompt shows the threads c0, c1",
    ]


@pytest.mark.slow
def test_the_conversations_scenario_passes_and_repeats_itself() -> None:
    """agent_conversations: every conversation input acknowledged and checked, under crashes;
    the same seed is the same run."""
    scenario = load_scenario("agent_conversations", ["workload.params.agents=2"])
    first, second = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, f"{first.result.failure and first.result.failure.describe()}"
    assert first.metrics["conversations.acked"] == 2 * (2 * 3 + 1)
    assert first.result.trace_hash == second.result.trace_hash
