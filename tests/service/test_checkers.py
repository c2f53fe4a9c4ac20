"""The chaos checkers bite: synthetic histories and event logs with the violations they look
for (so a passing chaos run means something)."""

from __future__ import annotations

from kelpie_agent.agent import AgentMessage, AssistantMessage, LettaUsage, TurnResult, UserMessage

from .chaos import Ack, check_messages, check_single_activation


def _user(id: str, otid: str, run: str, seq: int) -> UserMessage:
    return UserMessage(id=id, date=0.0, seq=seq, run_id=run, otid=otid, content=f"note {otid}")


def _reply(id: str, run: str, seq: int, text: str) -> AssistantMessage:
    return AssistantMessage(id=id, date=0.0, seq=seq, run_id=run, content=text)


def _ack(agent: str, otid: str, run: str, *messages: AssistantMessage) -> Ack:
    result = TurnResult(run, messages, "end_turn", LettaUsage(1, 1, 1))
    return Ack(agent, otid, True, result)


def test_single_activation_checker_finds_overlaps_and_accepts_handoffs_and_crashes() -> None:
    good = [
        (1.0, "n1", 1, "actor.acquired", "agent/a"),
        (2.0, "n1", 1, "actor.deactivated", "agent/a"),
        (2.1, "n1", 1, "actor.released", "agent/a"),
        (2.5, "n2", 1, "actor.acquired", "agent/a"),
        (3.0, "n2", 1, "node.crash", ""),
        (9.5, "n3", 1, "actor.acquired", "agent/a"),
        (9.6, "n2", 2, "actor.acquired", "agent/b"),
    ]
    assert check_single_activation(good) == []
    overlapping = [
        (1.0, "n1", 1, "actor.acquired", "agent/a"),
        (2.0, "n2", 1, "actor.acquired", "agent/a"),
        (3.0, "n1", 1, "actor.lease_lost", "agent/a"),
    ]
    [problem] = check_single_activation(overlapping)
    assert "agent/a" in problem and "n1#1" in problem and "n2#1" in problem
    never_closed = [
        (1.0, "n1", 1, "actor.acquired", "agent/a"),
        (5.0, "n1", 2, "actor.acquired", "agent/a"),  # a new incarnation without a crash
    ]
    assert len(check_single_activation(never_closed)) == 1


def test_message_checker_finds_lost_duplicated_and_mixed_messages() -> None:
    issued = {"c0-m0": "A", "c0-m1": "B"}
    history_a: list[AgentMessage] = [
        _user("u1", "c0-m0", "run-1", 1),
        _reply("r1", "run-1", 2, "You said c0-m0"),
    ]
    history_b: list[AgentMessage] = [
        _user("u2", "c0-m1", "run-2", 1),
        _reply("r2", "run-2", 2, "You said c0-m1"),
    ]
    acks = [
        _ack("A", "c0-m0", "run-1", history_a[1]),  # type: ignore[arg-type]
        _ack("B", "c0-m1", "run-2", history_b[1]),  # type: ignore[arg-type]
    ]
    assert check_messages({"A": history_a, "B": history_b}, acks, issued) == []

    lost = check_messages({"A": history_a, "B": history_b[:1]}, acks, issued)
    assert lost == ["c0-m1: response message r2 missing from the history"]
    twice: list[AgentMessage] = [
        *history_a,
        _user("u3", "c0-m0", "run-3", 3),
        _reply("r3", "run-3", 4, "c0-m0"),
    ]
    found = check_messages({"A": twice, "B": history_b}, acks, issued)
    assert "input c0-m0 ran 2 times" in found
    assert "acknowledged c0-m0 is stored 2 times" in found
    mixed: list[AgentMessage] = [*history_a, _reply("r9", "run-1", 3, "about c0-m1")]
    assert check_messages({"A": mixed, "B": history_b}, acks, issued) == [
        "A: replied about c0-m1 of another agent"
    ]
    foreign_run: list[AgentMessage] = [*history_a, _reply("r8", "run-2", 3, "hello")]
    assert check_messages({"A": foreign_run, "B": history_b}, acks, issued) == [
        "A: message r8 of a run that is not its own"
    ]
