"""``readback`` (``_agent_readback``) and its pure checker (``_agent_readback_checks``)."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_lists import Walk
from kelpie_dst.workloads._agent_readback_checks import (
    Filtered,
    ReadbackLog,
    Shown,
    Stamp,
    check_once,
    check_readback,
    check_stamps,
)


@pytest.mark.slow  # two runs of about 4 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_readback")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["readback.shown"] > 50
    assert first.metrics["readback.walks"] + first.metrics["readback.unsettled"] == 6
    assert first.metrics["readback.filtered"] >= 8
    assert first.metrics["readback.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _log() -> ReadbackLog:
    """A consistent history: a passage and an archive shown as set, a list read every way,
    a filter with a limit, an answer without the input."""
    log = ReadbackLog()
    log.model["passage:p"] = {"tags": ["red"]}
    log.shown.append(Shown("passages.create", "passage:p", {"tags": ["red"]}, {"tags": ["red"]}))
    log.shown.append(Shown("archives.create", "archive:1", {"name": "a"}, {"name": "a"}))
    log.shown.append(Shown("archives.list", "archive:other", {"name": "x"}, None))
    log.orders.append(("archives.list", ["1", "2", "3"], ["3", "2", "1"]))
    log.walks.append(
        (
            "archives.list",
            ["1", "2", "3"],
            [
                Walk("asc", "after", 2, ("1", "2", "3"), 2),
                Walk("desc", "before", 1, ("3", "2", "1"), 1),
            ],
        )
    )
    log.filtered.append(Filtered("archives.list(agent_id)", ["1"], ["1", "2", "3"], {"1", "3"}, 1))
    log.filtered.append(
        Filtered("tags.list(before)", ["3"], ["1", "2", "3"], {"1", "3"}, 1, nearest_end=True)
    )
    log.answers.append(("messages.create", ["reasoning_message", "assistant_message"]))
    log.members.append(("archives.list(agent_id)", ["1", "3"], ["3", "1"]))
    return log


def test_a_consistent_history_passes() -> None:
    assert check_readback(_log()) == []


def test_a_field_shown_otherwise_than_set_is_named_with_its_route() -> None:
    log = _log()
    log.shown.append(
        Shown("archives.update", "archive:1", {"description": None}, {"description": "d"})
    )
    log.shown.append(Shown("passages.list", "passage:p", {"tags": []}, {"tags": ["red"]}))
    problems = check_readback(log)
    assert len(problems) == 2
    assert "archives.update: archive:1 shows description=None" in problems[0]
    assert "passages.list: passage:p shows tags=[]" in problems[1]


def test_a_stale_answer_is_judged_by_what_was_set_when_it_was_asked() -> None:
    log = _log()  # the model moved on; the answer is judged by its own snapshot
    log.model["passage:p"] = {"tags": ["blue"]}
    assert check_readback(log) == []


def test_orders_walks_and_filters_that_disagree_with_the_list_are_named() -> None:
    log = _log()
    log.orders.append(("passages", ["1", "2"], ["1", "2"]))
    log.walks.append(("messages", ["1", "2", "3"], [Walk("asc", "before", 1, ("2", "1", "3"), 1)]))
    log.filtered.append(Filtered("archives.list(name)", [], ["1", "2", "3"], {"3"}, 1))
    log.filtered.append(
        Filtered("tags.list(name)", ["1", "2"], ["1", "2", "3"], {"1", "2", "3"}, 3)
    )
    problems = check_readback(log)
    assert len(problems) == 4
    assert "newest first" in problems[0]
    assert "messages read asc by 'before' in pages of 1: out of order" in problems[1]
    assert "archives.list(name): got [], but" in problems[2]
    assert "tags.list(name): got ['1', '2']" in problems[3]


def test_an_echoed_input_a_wrong_member_and_a_failed_request_are_named() -> None:
    log = _log()
    log.answers.append(("send", ["user_message", "assistant_message"]))
    log.members.append(("identity agents", ["agent-1"], ["agent-1", "agent-2"]))
    log.problems.append("readback tags: NotFoundError: gone")
    problems = check_readback(log)
    assert problems[0] == "readback tags: NotFoundError: gone"
    assert any("echoes the input" in p for p in problems)
    assert any("not expected ['agent-2']" in p for p in problems)


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_a_before_cursor_keeps_the_items_nearest_it(limit: int) -> None:
    full = ["a", "b", "c", "d"]
    want = ["b", "c"][2 - limit :] if limit else []
    log = ReadbackLog()
    log.filtered.append(Filtered("tags", want, full, {"b", "c"}, limit, nearest_end=True))
    assert check_readback(log) == []


def test_a_create_answered_first_time_must_be_listed_once() -> None:
    assert check_once([("passages", ["a", "b"], ["b", "a", "c"])]) == []
    # "c" was made on a retry (not in the first list): its in-flight first attempt may land too
    assert check_once([("passages", ["a"], ["a", "c", "c"])]) == []
    [problem] = check_once([("passages", ["a", "b"], ["a", "b", "a"])])
    assert problem == "passages: made once, listed more than once: ['a']"


def test_a_change_that_leaves_updated_at_is_reported() -> None:
    made, changed = "2030-01-01T00:00:00Z", "2030-01-01T00:00:05Z"
    good = [
        Stamp("tools.create", "tool:t", made, made),
        Stamp("tools.update", "tool:t", made, changed, change=True),
        Stamp("tools.retrieve", "tool:t", made, changed),
    ]
    assert check_stamps(good) == []
    stale = [good[0], Stamp("tools.update", "tool:t", made, made, change=True)]
    assert check_stamps(stale) == [
        f"tools.update: tool:t was changed, but its updated_at={made} is the one tools.create "
        "showed before the change"
    ]
    moved = [good[0], Stamp("tools.retrieve", "tool:t", changed, changed)]
    assert len(check_stamps(moved)) == 1
