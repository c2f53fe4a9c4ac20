"""links_agree's pure check, and the schedules oracle's judgement of a refused create."""

from __future__ import annotations

from kelpie_dst.workloads._agent_schedules import Log, check
from kelpie_dst.workloads.agent_links import LinksLog, link_problems


def _log() -> LinksLog:
    log = LinksLog(agents=["agent-a", "agent-b"])
    log.targets = {"archive": ["archive-1"], "identity": [], "folder": ["source-1"]}
    for agent in log.agents:
        for kind in ("archive", "identity", "folder"):
            log.agent_side[(agent, kind)] = frozenset()
    log.thing_side = {("archive", "archive-1"): frozenset(), ("folder", "source-1"): frozenset()}
    return log


def test_pairs_attached_on_both_sides_or_neither_pass() -> None:
    log = _log()
    log.agent_side[("agent-a", "folder")] = frozenset({"source-1"})
    log.thing_side[("folder", "source-1")] = frozenset({"agent-a"})
    log.looks.append(("agent-b", "archive", "archive-1", False, False))
    assert link_problems(log) == []


def test_a_link_without_the_agents_record_is_a_problem() -> None:
    log = _log()
    log.thing_side[("archive", "archive-1")] = frozenset({"agent-b"})
    log.tries.append(("agent-b", "archive", "archive-1", True, "UnavailableError"))
    [problem] = link_problems(log)
    assert "agent agent-b does not list archive archive-1, whose agents list it" in problem
    assert "(True, 'UnavailableError')" in problem


def test_a_look_after_a_failure_is_judged() -> None:
    log = _log()
    log.looks.append(("agent-a", "folder", "source-1", True, False))
    [problem] = link_problems(log)
    assert problem.startswith("after a failed request, agent agent-a lists folder source-1")


def test_a_refused_valid_schedule_is_a_problem() -> None:
    log = Log()
    log.refused.append("* 0-0 * * *: cron_expression: hour: '0-0' is outside 0-23 or reversed")
    assert check(log, grace=60.0, tolerance=5.0) == [
        "a valid schedule was refused: * 0-0 * * *: cron_expression: hour: '0-0' is outside "
        "0-23 or reversed"
    ]
