"""``deletes`` (``_agent_deletes``) and its pure checker (``_agent_deletes_checks``)."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_deletes_checks import DeletesLog, check_deletes


@pytest.mark.slow  # two runs of about 5 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_deletes")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    # one of each of nine kinds, a passage of a kept archive, the deleted archive's two
    assert first.metrics["deletes.deleted"] == 11
    assert first.metrics["deletes.retrieved"] == 2 * 19  # two rounds of every retrieve
    assert first.metrics["deletes.listed"] == 2 * 15
    assert first.metrics["deletes.again"] == 9
    assert first.metrics["deletes.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _log() -> DeletesLog:
    """Two tools made, one deleted; read back as a total delete shows it."""
    log = DeletesLog()
    log.made["tool"] = ["t1", "t2"]
    log.deleted["tool"] = ["t1"]
    log.retrieved += [("tools.retrieve(t1)", "tool", "t1", False)]
    log.retrieved += [("tools.retrieve(t2)", "tool", "t2", True)]
    log.listed.append(("tools.list", "tool", ["builtin", "t2"], ["t1", "t2"]))
    return log


def test_a_total_delete_is_no_problem() -> None:
    assert check_deletes(_log()) == []


def test_a_deleted_thing_still_retrievable_is_a_problem() -> None:
    log = _log()
    log.retrieved[0] = ("tools.retrieve(t1)", "tool", "t1", True)
    [problem] = check_deletes(log)
    assert "tools.retrieve(t1)" in problem and "still there" in problem


def test_a_deleted_thing_still_listed_is_a_problem() -> None:
    log = _log()
    log.listed.append(("agents.tools.list(a)", "tool", ["t1", "t2"], ["t1", "t2"]))
    [problem] = check_deletes(log)
    assert "agents.tools.list(a): lists the tool t1" in problem


def test_a_delete_that_took_another_thing_is_a_problem() -> None:
    log = _log()
    log.retrieved[1] = ("tools.retrieve(t2)", "tool", "t2", False)
    log.listed[0] = ("tools.list", "tool", ["builtin"], ["t1", "t2"])
    problems = check_deletes(log)
    assert len(problems) == 2
    assert all("never deleted" in p for p in problems)


def test_a_second_delete_answered_2xx_is_a_problem() -> None:
    log = _log()
    log.again.append(("tools.delete(t1) again", "tool", "t1", True, False))
    assert check_deletes(log) == []
    log.again.append(("tools.delete(t1) again", "tool", "t1", False, False))
    [problem] = check_deletes(log)
    assert "already deleted was answered 2xx" in problem


def test_a_second_delete_answered_2xx_under_a_fault_is_excused() -> None:
    # a fault during the repeat may leave its outcome unknown, and the service settles the
    # retry by finding the thing gone (Dlead25-2)
    log = _log()
    log.again.append(("schedules.delete(s1) again", "schedule", "s1", False, True))
    assert check_deletes(log) == []


def test_requests_that_failed_are_problems() -> None:
    log = _log()
    log.problems.append("deletes deletes: NotFoundError: tool t1")
    assert check_deletes(log) == ["deletes deletes: NotFoundError: tool t1"]


def _detached() -> DeletesLog:
    """Blocks b1, b2 made; b1 deleted, b2 detached from the walker's agent (``detaches``)."""
    log = DeletesLog()
    log.made["block"] = ["b1", "b2"]
    log.deleted["block"] = ["b1"]
    log.deleted["agent block"] = ["b2"]
    return log


def test_a_detached_block_is_gone_from_the_agent_and_kept_everywhere_else() -> None:
    log = _detached()
    log.listed.append(("agents.blocks.list(a)", "agent block", [], ["b1", "b2"]))
    log.listed.append(("blocks.list", "block", ["b2"], ["b1", "b2"]))
    log.retrieved.append(("blocks.retrieve(b2)", "block", "b2", True))
    assert check_deletes(log) == []


def test_a_detached_block_still_on_the_agent_is_a_problem() -> None:
    log = _detached()
    log.listed.append(("agents.blocks.list(a)", "agent block", ["b2"], ["b1", "b2"]))
    assert check_deletes(log) == [
        "agents.blocks.list(a): lists the agent block b2, deleted (acknowledged)"
    ]


def test_a_detach_that_deleted_the_block_is_a_problem() -> None:
    log = _detached()
    log.listed.append(("blocks.list", "block", [], ["b1", "b2"]))
    log.retrieved.append(("blocks.retrieve(b2)", "block", "b2", False))
    assert check_deletes(log) == [
        "blocks.retrieve(b2): 404 for a block never deleted",
        "blocks.list: the block b2 is missing, never deleted",
    ]


def test_a_deleted_block_is_gone_from_the_agent_too() -> None:
    log = _detached()
    log.listed.append(("agents.blocks.list(a)", "agent block", ["b1"], ["b1", "b2"]))
    assert check_deletes(log) == [
        "agents.blocks.list(a): lists the agent block b1, deleted (acknowledged)"
    ]
