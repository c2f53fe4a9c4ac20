"""agent_handover: requests that cross nodes (missing things, tool runs, retried sends, a
background run, an agent file's steps) through the SDK under faults. The scenario passes and
repeats its trace; the oracle names hand-made bad histories."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_handover import DOC_HISTORY
from kelpie_dst.workloads._agent_handover_checks import (
    FileRoundTrip,
    HandoverLog,
    Missing,
    Replay,
    TagRun,
    check_handover,
    message_shape,
)

SMALL = ["workload.params.agents=1", "duration=30s"]


@pytest.mark.slow  # two runs of a few seconds each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_handover", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["handover.missing"] == 4
    assert first.metrics["handover.tag_runs"] == 6
    assert first.metrics["handover.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _written() -> tuple[tuple[object, ...], ...]:
    return tuple(message_shape(m) for m in DOC_HISTORY)


def _log() -> HandoverLog:
    """A history a correct server gives."""
    log = HandoverLog()
    log.missing.append(Missing("detach a tool never attached", 404, 1.0, 2.0))
    log.missing.append(Missing("delete a passage that does not exist", 404, 3.0, 4.0))
    log.tag_runs += [TagRun("[hv-0]", 1, "success"), TagRun("[hv-1]", 2, "found")]
    log.notes = "notes:[hv-0][hv-1]"
    log.replays.append(
        Replay("send 0 again", (("m-1", "user_message"),), (("m-1", "user_message"),))
    )
    log.runs_seen += [("run-1", "at once", "running"), ("run-1", "at the end", "completed")]
    log.files.append(
        FileRoundTrip(
            "import then export",
            _written(),
            _written(),
            (("call-tide-1", "success"), ("call-tide-2", "error")),
        )
    )
    return log


def test_a_consistent_history_passes() -> None:
    assert check_handover(_log()) == []


def test_a_missing_thing_answered_200_is_named_unless_the_server_retried_meanwhile() -> None:
    log = _log()
    log.missing[0] = Missing("detach a tool never attached", 200, 1.0, 2.0)
    assert any("not 404" in p for p in check_handover(log))
    assert check_handover(log, retries=[1.5]) == []  # after an unknown outcome: documented
    assert any("not 404" in p for p in check_handover(log, retries=[2.5]))


def test_a_tool_run_repeated_behind_the_clients_back_is_named() -> None:
    log = _log()
    log.notes = "notes:[hv-0][hv-0][hv-1]"
    assert any("repeated behind its back" in p for p in check_handover(log))
    log.notes = "notes:[hv-1]"
    assert any("not in the notes block" in p for p in check_handover(log))


def test_a_replay_with_other_runs_messages_is_named() -> None:
    log = _log()
    log.replays[0] = Replay(
        "send 0 again", (("m-1", "user_message"),), (("m-1", "user_message"), ("m-9", "x"))
    )
    assert any("not the first answer" in p for p in check_handover(log))


def test_a_run_not_found_after_create_async_is_named() -> None:
    log = _log()
    log.runs_seen[0] = ("run-1", "at once", None)
    assert any("404 for a run" in p for p in check_handover(log))


def test_a_step_split_on_export_or_a_status_lost_on_import_is_named() -> None:
    log = _log()
    split = list(_written())
    role, parts, calls, call_id, returns, approvals = split[1]
    split[1:2] = [
        (role, parts, (), call_id, returns, approvals),
        (role, (), calls, call_id, returns, approvals),
    ]
    log.files[0] = FileRoundTrip(
        "import then export", _written(), tuple(split), log.files[0].statuses
    )
    assert any("not the document's" in p for p in check_handover(log))
    log = _log()
    log.files[0] = FileRoundTrip(
        "import then export",
        _written(),
        _written(),
        (("call-tide-1", "success"), ("call-tide-2", "success")),
    )
    assert any("lists its tool results" in p for p in check_handover(log))


def test_an_approval_decision_changed_on_the_way_is_named() -> None:
    log = _log()
    flipped = [
        (*shape[:5], tuple((*d[:2], "True", *d[3:]) for d in shape[5])) for shape in _written()
    ]
    assert flipped != list(_written())  # the document has a denial
    log.files[0] = FileRoundTrip(
        "import then export", _written(), tuple(flipped), log.files[0].statuses
    )
    assert any("not the document's" in p for p in check_handover(log))


def test_a_failed_request_is_a_problem() -> None:
    log = _log()
    log.problems.append("handover background: NotFoundError: 404")
    assert check_handover(log) == ["handover background: NotFoundError: 404"]
