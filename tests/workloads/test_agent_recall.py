"""agent_recall: recall search across conversations, conversation updates, forks and deletes,
and step records, under faults. The scenario passes and repeats its trace; each pure check
passes a consistent history and names a hand-made bad one."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

import attrs
import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_recall_checks import (
    Entry,
    Recall,
    StepSeen,
    check_agent_patches,
    check_archived,
    check_feedback,
    check_open_files,
    check_recall,
    check_shelf_search,
    check_shelves,
    check_steps,
    check_summaries,
    check_threads,
    parse_results,
    score,
)

SMALL = ["workload.params.span=30.0", "duration=60s"]


@pytest.mark.slow  # two runs of a few seconds each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_recall", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["recall.searches"] > 3
    assert first.metrics["recall.results"] > 0
    assert first.metrics["recall.steps_matched"] > 0
    assert first.metrics["recall.opens_checked"] > 0
    assert first.result.trace_hash == again.result.trace_hash


# -- conversation_search ------------------------------------------------------------------------
T0 = _dt.datetime(2026, 1, 1, 0, 1, tzinfo=_dt.UTC).timestamp()  # a minute into the epoch's day


def _entries() -> tuple[Entry, ...]:
    return (
        Entry("user", "t0-c0-1 kelp tide", T0, T0 + 1),
        Entry("assistant", "ack t0-c0-1 kelp tide", T0, T0 + 1),
        Entry("user", "t0-c0-2 otter", T0 + 2, T0 + 3),
        Entry("assistant", "ack t0-c0-2 otter", T0 + 2, T0 + 3),
        Entry("user", "t0-c0-3 kelp", T0 + 4, T0 + 5),
        Entry("assistant", "ack t0-c0-3 kelp", T0 + 4, None),  # its reply was never seen
    )


def _answer(*rows: tuple[str, str, float]) -> str:
    if not rows:
        return "No results found."
    found = [
        {"timestamp": _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(), "role": r, "content": c}
        for r, c, t in rows
    ]
    return f"Showing {len(found)} results: {json.dumps(found)}"


def _recall(answer: str, **changes: Any) -> Recall:
    r = Recall(
        "a0", "c0", "kelp", None, None, None, None, T0 + 10, T0 + 11, "success", answer, _entries()
    )
    return attrs.evolve(r, **changes)


KELP = (  # newest first
    ("assistant", "ack t0-c0-3 kelp", T0 + 4.6),
    ("user", "t0-c0-3 kelp", T0 + 4.5),
    ("assistant", "ack t0-c0-1 kelp tide", T0 + 0.6),
    ("user", "t0-c0-1 kelp tide", T0 + 0.5),
)


def test_a_search_that_answers_what_the_thread_holds_passes() -> None:
    assert check_recall(_recall(_answer(*KELP))) == []
    assert check_recall(_recall(_answer(*KELP[:3]))) == []  # the unseen reply may be absent
    users = _answer(KELP[1], KELP[3])
    assert check_recall(_recall(users, roles=("user",))) == []
    assert check_recall(_recall(_answer(KELP[1]), roles=("user",), limit=1)) == []
    assert check_recall(_recall(_answer(*KELP), end_day="2026-01-01")) == []
    assert check_recall(_recall(_answer(), end_day="2025-12-31")) == []
    assert check_recall(_recall(_answer(), start_day="2026-01-02")) == []


def test_a_search_that_answers_old_matches_or_out_of_order_is_caught() -> None:
    oldest = check_recall(_recall(_answer(KELP[3]), roles=("user",), limit=1))
    assert any("not the best matches" in p for p in oldest)
    shuffled = check_recall(_recall(_answer(KELP[1], KELP[0], KELP[2])))
    assert any("not best first" in p for p in shuffled)


def test_a_two_word_search_ranks_by_words_then_phrase() -> None:
    assert score("kelp tide", "t0-c0-1 kelp tide") == 2 + 3
    assert score("kelp tide", "t0-c0-3 kelp") == 1
    assert score("KELP", "ack t0-c0-3 kelp") == 1 + 2
    assert score("kelp tide", "t0-c0-2 otter") == 0
    r = _recall("", query="kelp tide", roles=("user",))
    best = _answer(("user", "t0-c0-1 kelp tide", T0 + 0.5), ("user", "t0-c0-3 kelp", T0 + 4.5))
    assert check_recall(attrs.evolve(r, answer=best)) == []
    newest = _answer(("user", "t0-c0-3 kelp", T0 + 4.5), ("user", "t0-c0-1 kelp tide", T0 + 0.5))
    assert any("not the best matches" in p for p in check_recall(attrs.evolve(r, answer=newest)))


def _by_date(answer: str, page: int = 0, **changes: Any) -> Recall:
    r = _recall(answer, tool="conversation_search_date", page=page, query="")
    entries = tuple(attrs.evolve(e, acked=e.acked or e.sent + 1) for e in _entries())
    days = {"start_day": "2026-01-01", "end_day": "2026-01-01", **changes}
    return attrs.evolve(r, entries=entries, **days)


def _page(total: int, page: int, *rows: tuple[str, str, float]) -> str:
    found = [
        {"timestamp": _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(), "role": r, "content": c}
        for r, c, t in rows
    ]
    return f"Showing {len(found)} of {total} results (page {page}/1): {json.dumps(found)}"


OLDEST_FIRST = [
    ("user", "t0-c0-1 kelp tide", T0 + 0.5),
    ("assistant", "ack t0-c0-1 kelp tide", T0 + 0.6),
    ("user", "t0-c0-2 otter", T0 + 2.5),
    ("assistant", "ack t0-c0-2 otter", T0 + 2.6),
    ("user", "t0-c0-3 kelp", T0 + 4.5),
    ("assistant", "ack t0-c0-3 kelp", T0 + 4.6),
]


def test_a_date_search_pages_the_thread_oldest_first() -> None:
    assert check_recall(_by_date(_page(6, 0, *OLDEST_FIRST[:5]))) == []
    assert check_recall(_by_date(_page(6, 1, *OLDEST_FIRST[5:]), page=1)) == []
    assert check_recall(_by_date("No results found.", end_day="2025-12-31")) == []
    shifted = check_recall(_by_date(_page(6, 1, *OLDEST_FIRST[4:5]), page=1))
    assert any("page 1 holds" in p for p in shifted)
    short = check_recall(_by_date(_page(5, 0, *OLDEST_FIRST[:5])))
    assert any("a total of 5" in p for p in short)


def test_a_search_that_ignores_its_roles_is_caught() -> None:
    problems = check_recall(_recall(_answer(*KELP), roles=("user",)))
    assert any("not of the roles asked" in p for p in problems)


def test_a_search_whose_end_day_ends_at_its_first_instant_is_caught() -> None:
    problems = check_recall(_recall(_answer(), end_day="2026-01-01"))
    assert any("0 results" in p and "between 3 and 4" in p for p in problems)


def test_a_search_that_shows_another_threads_message_is_caught() -> None:
    stranger = ("user", "t0-own-7 kelp", T0 + 1)
    problems = check_recall(_recall(_answer(*KELP[:3], stranger)))
    assert any("not a message of this thread" in p for p in problems)


def test_a_search_that_misses_messages_or_ignores_its_limit_is_caught() -> None:
    assert any("between 3 and 4" in p for p in check_recall(_recall(_answer(*KELP[:2]))))
    assert any("between 1 and 1" in p for p in check_recall(_recall(_answer(*KELP), limit=1)))


def test_a_result_without_the_word_or_out_of_range_is_caught() -> None:
    otter = ("user", "t0-c0-2 otter", T0 + 2.5)
    assert any("does not contain" in p for p in check_recall(_recall(_answer(*KELP[:3], otter))))
    late = ("user", "t0-c0-1 kelp tide", T0 + 86_400)
    problems = check_recall(_recall(_answer(KELP[0], KELP[1], late), end_day="2026-01-01"))
    assert any("outside the range" in p for p in problems)


def test_answers_parse() -> None:
    assert parse_results("No results found.") == []
    assert parse_results(_answer(*KELP[1:2])) == [
        {"timestamp": "2026-01-01T00:01:04.500000+00:00", "role": "user", "content": "t0-c0-3 kelp"}
    ]
    assert parse_results("Showing 2 results: []") is None
    assert any("not a search answer" in p for p in check_recall(_recall("oops")))


# -- threads, summaries, steps -------------------------------------------------------------------
def test_threads_hold_exactly_their_inputs() -> None:
    expected = {"a own": ["t-1", "t-2"], "a c0": ["t-3"], "a c0f": ["t-3", "t-4"]}
    stored: dict[str, list[str] | None] = {
        "a own": ["t-1", "t-2"],
        "a c0": ["t-3"],
        "a c0f": ["t-3", "t-4"],
    }
    assert check_threads(expected, {}, stored) == []
    assert check_threads(expected, {"a c0": {"t-9"}}, {**stored, "a c0": ["t-3", "t-9"]}) == []
    wiped = check_threads(expected, {}, {**stored, "a own": []})
    assert any("acknowledged inputs ['t-1', 't-2'], stored []" in p for p in wiped)
    short_fork = check_threads(expected, {}, {**stored, "a c0f": ["t-4"]})
    assert any("a c0f" in p for p in short_fork)
    leaked = check_threads(expected, {}, {**stored, "a c0": ["t-3", "t-1"]})
    assert any("never sent" in p for p in leaked)
    assert check_threads(expected, {}, {**stored, "a c1": ["t-5"]}) != []
    assert check_threads(expected, {}, {**stored, "a c0": None}) != []


def test_a_summary_is_the_last_one_set() -> None:
    assert check_summaries({"c": (["s0", "s1"], "s1")}) == []
    assert check_summaries({"c": (["s0", "s1"], "s0")}) != []


def test_steps_are_the_models_answers() -> None:
    steps = [
        StepSeen("step-1", "msg-1", 100, 7, None, "run-1", 0, None, "m"),
        StepSeen("step-2", "msg-2", 120, 9, None, "run-1", 1, "end_turn", "m"),
        StepSeen("step-3", "msg-9", 1, 1, None, "run-2", 0, None, "m"),
    ]
    usage = {"msg-1": (100, 7, "m"), "msg-2": (120, 9, "m")}
    stops = {"run-1": "end_turn", "run-2": "max_steps"}
    assert check_steps(steps, usage, stops) == []
    assert check_steps(steps, {**usage, "msg-1": (7, 100, "m")}, stops) != []
    assert any("model" in p for p in check_steps(steps, {**usage, "msg-2": (120, 9, "x")}))
    late = [attrs.evolve(steps[0], stop_reason="end_turn"), steps[1]]
    assert any("stop reasons" in p for p in check_steps(late, usage, stops))
    none = [steps[0], attrs.evolve(steps[1], stop_reason=None)]
    assert any("stop reasons" in p for p in check_steps(none, usage, stops))


def test_feedback_is_the_last_given() -> None:
    given: dict[str, list[str | None]] = {"s1": ["positive", None], "s2": ["negative"]}
    found = {"s1": None, "s2": "negative"}
    assert check_feedback(given, found, {"s2"}, {"s1"}) == []
    kept = check_feedback(given, {**found, "s1": "positive"}, {"s1", "s2"}, set())
    assert any("last set to None" in p for p in kept)
    assert any("has_feedback=true" in p for p in kept)


def test_the_open_files_are_the_most_recently_opened() -> None:
    assert check_open_files([("a", ("f1", "f2"), ("f1", "f2"))]) == []
    assert check_open_files([("a", ("f1", "f2"), ("f0", "f2"))]) != []


def test_conversations_are_listed_by_their_archived_flag() -> None:
    model = {"c0": (False, False), "c1": (True, False), "c2": (False, True)}
    found = {"c0": False, "c1": True, "c2": None}
    listed = {"archived": {"c1", "orphan"}, "unarchived": {"c0"}, "all": {"c0", "c1", "orphan"}}
    assert check_archived(model, found, listed) == []
    stale = check_archived(model, {**found, "c1": False}, listed)
    assert any("archived was last set to True" in p for p in stale)
    wrong = {**listed, "archived": set(), "unarchived": {"c0", "c1"}}
    assert any("c1" in p for p in check_archived(model, found, wrong))
    kept = {**listed, "all": {"c0", "c1", "c2"}}
    assert any("c2" in p for p in check_archived(model, found, kept))


def test_an_agent_patch_changes_what_it_gives() -> None:
    model: tuple[object, ...] = (["deep"], "", {})
    assert check_agent_patches([("a", '{"description": ""}', model, model)]) == []
    kept: tuple[object, ...] = (["blue", "deep"], "", {})
    assert check_agent_patches([("a", '{"tags": ["deep"]}', model, kept)]) != []


def test_an_archival_search_answers_the_attached_archives_only() -> None:
    certain, possible = ["p1", "p2"], ["p1", "p2", "p3"]
    assert check_shelf_search([("a", certain, possible, 10, ["p2", "p1"])]) == []
    assert check_shelf_search([("a", certain, possible, 1, ["p3"])]) == []
    detached = check_shelf_search([("a", certain, possible, 10, ["p1", "p2", "p9"])])
    assert any("no attached archive" in p for p in detached)
    assert any(
        "not between 2 and 3" in p
        for p in check_shelf_search([("a", certain, possible, 10, ["p1"])])
    )


def test_an_agent_lists_exactly_its_attached_archives() -> None:
    model = {"r1": (True, False), "r2": (False, False), "r3": (True, True)}
    read = ({"r1", "other"}, {"r1"}, {"r1": {"r1"}, "r2": {"r2"}, "r3": set()})
    assert check_shelves("a", model, read) == []
    kept = ({"r1"}, {"r1", "r3"}, read[2])
    assert any("archive_ids" in p for p in check_shelves("a", model, kept))
    named = (read[0], read[1], {**read[2], "r3": {"r3"}})
    assert any("r3" in p for p in check_shelves("a", model, named))
