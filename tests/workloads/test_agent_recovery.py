"""The recovery oracle (``_agent_recovery``): a run an activation left ``running`` must be
finished by the next activation of its agent before it reports ``activated``, in the agent's
own history and in each conversation; an activation that died first is exempt. Hand-made
journals, good and bad; and the journal's decoding of a real run record."""

from __future__ import annotations

from kelpie_agent.agent._checkpoint import SessionCheckpoint
from kelpie_agent.agent._codec import pack
from kelpie_agent.agent._runs import RunRecord, run_status
from kelpie_dst.workloads._agent_checks import Commit, Observed
from kelpie_dst.workloads._agent_recovery import (
    LETTA_STOP_REASONS,
    RunWrite,
    check_clean_ends,
    check_recovery,
    check_run_statuses,
    run_write,
)
from kelpie_dst.workloads._run_record_checks import expected_status

A = "agent-1"


def observed(kind: str, node: str = "server-2", actor: str = f"agent/{A}") -> Observed:
    return Observed(0.0, node, kind, actor)


def journal(*items: object) -> tuple[list[RunWrite], list[object]]:
    """``items``: Observed events and ``(run, thread, status)`` run writes, in order; each
    write takes a journal position of its own (a Commit)."""
    writes: list[RunWrite] = []
    entries: list[object] = []
    for item in items:
        if isinstance(item, Observed):
            entries.append(item)
        else:
            run, thread, status = item  # type: ignore[misc]
            writes.append(RunWrite(len(entries), 1.0, "server-1", run, A, thread, status))
            entries.append(Commit(1.0, "server-1"))
    return writes, entries


def test_a_run_finished_while_reactivating_passes() -> None:
    writes, entries = journal(
        ("run-1", None, "running"),
        ("run-2", "conv-1", "running"),
        observed("actor.acquired"),
        ("run-1", None, "completed"),
        ("run-2", "conv-1", "failed"),
        observed("actor.activated"),
    )
    assert check_recovery(writes, entries, []) == []


def test_a_conversation_run_left_running_after_reactivation_is_caught() -> None:
    writes, entries = journal(
        ("run-1", None, "completed"),
        ("run-2", "conv-1", "running"),
        observed("actor.acquired"),
        observed("actor.activated"),
        ("run-2", "conv-1", "completed"),  # only once its client sent to it again
    )
    problems = check_recovery(writes, entries, [])
    assert len(problems) == 1
    assert "run run-2 (conversation conv-1) was left running" in problems[0]
    assert "server-2 reactivated the agent" in problems[0]


def test_the_agents_own_run_left_running_is_caught() -> None:
    writes, entries = journal(
        ("run-1", None, "running"),
        observed("actor.acquired"),
        observed("actor.activated"),
    )
    assert "run run-1 (its own history)" in check_recovery(writes, entries, [])[0]


def test_an_activation_that_died_before_activated_is_exempt() -> None:
    writes, entries = journal(
        ("run-1", None, "running"),
        observed("actor.acquired"),
        observed("actor.activate_failed"),
        observed("actor.acquired", node="server-3"),
        ("run-1", None, "completed"),
        observed("actor.activated", node="server-3"),
    )
    assert check_recovery(writes, entries, []) == []
    writes, entries = journal(
        ("run-1", None, "running"),
        observed("actor.acquired"),
        observed("actor.activated"),
    )
    assert check_recovery(writes, entries, [(2, "server-2")]) == []  # crashed first
    assert check_recovery(writes, entries, [(2, "server-1")]) != []  # another node did


def test_other_agents_and_runs_that_ended_do_not_count() -> None:
    writes, entries = journal(
        ("run-1", None, "running"),
        ("run-1", None, "cancelled"),
        observed("actor.acquired"),
        observed("actor.activated", actor="agent/agent-2"),
        observed("actor.activated"),
    )
    assert check_recovery(writes, entries, []) == []


def test_the_journal_reads_a_stored_run_record() -> None:
    record = RunRecord("run-9", A, "running", thread_id="conv-3")
    got = run_write(4, 2.5, "server-1", b"run/run-9", _decoded(pack(record)))
    assert got == RunWrite(4, 2.5, "server-1", "run-9", A, "conv-3", "running")
    assert run_write(4, 2.5, "server-1", b"msg/agent-1/01", _decoded(pack(record))) is None


def _decoded(raw: bytes) -> dict[str, object]:
    import msgpack

    value = msgpack.unpackb(raw, raw=False)
    assert isinstance(value, dict)
    return value


def test_a_run_that_ended_in_an_internal_error_is_caught() -> None:
    def ended(stop: str, error: str | None = None) -> RunWrite:
        return RunWrite(3, 7.25, "server-1", "run-5", A, None, "failed", stop, error)

    assert check_clean_ends([ended("llm_api_error"), ended("end_turn")]) == []
    assert check_clean_ends([ended("error", "IndexError: string index out of range")]) == [
        "agent agent-1: run run-5 ended with stop reason error at t=7.250 on server-1: "
        "IndexError: string index out of range"
    ]


def test_a_run_status_must_be_the_one_letta_gives_its_stop_reason() -> None:
    def write(status: str, stop: str | None) -> RunWrite:
        return RunWrite(3, 7.25, "server-1", "run-5", A, None, status, stop)

    good = [
        write("running", None),
        write("completed", "end_turn"),
        write("completed", "max_steps"),
        write("completed", "tool_rule"),
        write("completed", "requires_approval"),
        write("cancelled", "cancelled"),
        *(
            write("failed", stop)
            for stop in (
                "error",
                "llm_api_error",
                "invalid_tool_call",
                "no_tool_call",
                "invalid_llm_response",
                "max_tokens_exceeded",
            )
        ),
    ]
    assert check_run_statuses(good) == []
    where = "agent agent-1: run run-5 written at t=7.250 on server-1"
    assert check_run_statuses(
        [
            write("completed", "invalid_tool_call"),
            write("failed", "end_turn"),
            write("running", "end_turn"),
            write("completed", "finished"),
        ]
    ) == [
        f"{where}: stop reason invalid_tool_call but status completed (want failed)",
        f"{where}: stop reason end_turn but status failed (want completed)",
        f"{where}: status running with stop reason end_turn",
        f"{where}: status completed with stop reason 'finished'",
    ]


def test_the_server_maps_stop_reasons_to_statuses_as_the_oracle_does() -> None:
    """The server's table (``FAILED_STOPS``) and the oracle's, written apart, agree on every
    stop reason Letta defines that the oracle judges."""
    judged = 0
    for stop in sorted(LETTA_STOP_REASONS):
        cp = SessionCheckpoint("run-1", A, 8, status="done", stop_reason=stop)
        want = expected_status(stop)
        if want is not None:
            judged += 1
            assert run_status(cp) == want, stop
    assert judged == 11
    assert run_status(SessionCheckpoint("run-1", A, 8)) == "running"
