"""StepCommits: a model step's messages are committed with their step record, except in the
commit that creates an agent (an imported history, Dlead23-2)."""

from __future__ import annotations

import msgpack

from kelpie_dst.workloads._agent_steps import StepCommits

AGENT = "agent-00000000-0000-4000-8000-000000000001"


def _msg(
    seq: int, mid: str, step: str | None, kind: str = "assistant_message"
) -> tuple[bytes, bytes]:
    key = f"msg/{AGENT}/{seq:016d}".encode()
    return key, msgpack.packb({"_t": kind, "id": mid, "step_id": step})


def _step(sid: str, messages: list[str]) -> tuple[bytes, bytes]:
    return f"step/{sid}".encode(), msgpack.packb({"_t": "step", "id": sid, "message_ids": messages})


def test_a_step_and_its_messages_in_one_commit_pass() -> None:
    commits = StepCommits()
    commits.observe([_msg(5, "message-a", "step-1"), _step("step-1", ["message-a"])])
    assert commits.problems == []
    assert commits.steps == 1


def test_a_message_committed_without_its_step_is_flagged() -> None:
    commits = StepCommits()
    commits.observe([_msg(5, "message-a", "step-1")])
    assert commits.problems == ["message message-a was committed without its step step-1"]


def test_a_step_committed_without_its_messages_is_flagged() -> None:
    commits = StepCommits()
    commits.observe([_step("step-1", ["message-a"])])
    assert commits.problems == ["step step-1 was committed without its messages ['message-a']"]


def test_the_commit_that_creates_an_agent_may_carry_imported_steps() -> None:
    commits = StepCommits()
    commits.observe(
        [
            _msg(1, "message-system", None, "system_message"),
            _msg(2, "message-a", "step-imported"),
        ]
    )
    assert commits.problems == []


def test_a_later_commit_of_the_same_agent_is_judged_again() -> None:
    commits = StepCommits()
    commits.observe([_msg(1, "message-system", None, "system_message")])
    commits.observe([_msg(2, "message-a", "step-1")])
    assert commits.problems == ["message message-a was committed without its step step-1"]
