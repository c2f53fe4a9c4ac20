"""agent_memory: archival and recall search, memory tools, board edits racing the blocks API
and the prompt's counts, under faults. The scenario passes and repeats its trace; each pure
check passes a consistent history and names a hand-made bad one."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_memory_checks import (
    BoardOp,
    BoardRead,
    Hit,
    Probe,
    Search,
    Stored,
    check_board,
    check_listed,
    check_probes,
    check_searches,
)

SMALL = ["workload.params.span=30.0", "duration=60s"]


@pytest.mark.slow  # two runs of about 2 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_memory", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["memory.searches"] > 0
    assert first.metrics["memory.board_reads"] > 10
    assert first.metrics["memory.prompts_checked"] > 0
    assert first.result.trace_hash == again.result.trace_hash


# -- archival search --------------------------------------------------------------------------
DAY = 86_400.0


def _stored() -> list[Stored]:
    """Agent a1 with its own passages and the pool's; agent a2's one passage."""
    return [
        Stored("a1 red", frozenset({"red"}), "a1", 0, 1, 10 * DAY, "p1"),
        Stored("a1 red green", frozenset({"red", "green"}), "a1", 0, 1, 10 * DAY, "p2"),
        Stored("a1 plain", frozenset(), "a1", 0, 1, 10 * DAY, "p3"),
        Stored("pool old", frozenset({"red"}), "pool", 0, 1, 8 * DAY, "p4"),
        Stored("a2 red", frozenset({"red"}), "a2", 0, 1, 10 * DAY, "p5"),
    ]


def _search(**changes: Any) -> Search:
    s = Search("a1", frozenset({"a1", "pool"}), "api", ("red",), "any", 5, None, None, 5.0, 6.0, ())
    return attrs.evolve(s, **changes)


def _hits(*texts: str) -> tuple[Hit, ...]:
    return tuple(Hit(t, frozenset()) for t in texts)


def test_a_search_answering_the_model_passes() -> None:
    searches = [
        _search(hits=_hits("a1 red", "a1 red green", "pool old")),
        _search(top_k=2, hits=_hits("a1 red", "pool old")),
        _search(tags=("red", "green"), mode="all", hits=_hits("a1 red green")),
        _search(start=9 * DAY, end=11 * DAY, hits=_hits("a1 red", "a1 red green")),
        _search(tags=(), top_k=0, hits=()),
    ]
    assert check_searches(searches, _stored()) == []


@pytest.mark.parametrize(
    ("search", "says"),
    [
        (_search(top_k=2, hits=_hits("a1 red", "pool old", "a1 red green")), "over top_k"),
        (_search(hits=_hits("a1 red", "a1 red green", "pool old", "a2 red")), "of a2"),
        (_search(hits=_hits("a1 red", "a1 red green", "pool old", "nobody")), "nobody stored"),
        (
            _search(tags=("red", "green"), mode="all", hits=_hits("a1 red green", "a1 plain")),
            "outside the filters",
        ),
        (_search(start=9 * DAY, hits=_hits("a1 red", "a1 red green", "pool old")), "outside"),
        (_search(hits=_hits("a1 red", "pool old")), "must be between 3 and 3"),
    ],
)
def test_a_wrong_search_is_named(search: Search, says: str) -> None:
    problems = check_searches([search], _stored())
    assert any(says in p for p in problems), problems


def test_a_deleted_passage_must_not_be_found_and_an_unsure_one_may_be() -> None:
    stored = _stored()
    stored[0].delete_sent, stored[0].delete_acked = 2.0, 3.0
    assert check_searches([_search(hits=_hits("a1 red green", "pool old"))], stored) == []
    bad = check_searches([_search(hits=_hits("a1 red", "a1 red green", "pool old"))], stored)
    assert any("deleted before the search" in p for p in bad), bad
    stored[0].delete_acked = None  # the delete's outcome is unknown: either answer is right
    for hits in (_hits("a1 red", "a1 red green", "pool old"), _hits("a1 red green", "pool old")):
        assert check_searches([_search(hits=hits)], stored) == []


def test_the_final_list_keeps_every_acknowledged_passage() -> None:
    stored = _stored()
    scope = frozenset({"a1", "pool"})
    ok = ["a1 red", "a1 red green", "a1 plain", "pool old"]
    assert check_listed("a1", scope, ok, stored) == []
    lost = check_listed("a1", scope, ok[1:], stored)
    assert any("'a1 red' is lost" in p for p in lost), lost
    foreign = check_listed("a1", scope, [*ok, "a2 red"], stored)
    assert any("a2's passage" in p for p in foreign), foreign


# -- probes -----------------------------------------------------------------------------------
def test_probes_are_judged_by_the_documented_outcome() -> None:
    good = [
        Probe("a1", "memory_rethink", {"label": "persona"}, "error", "read-only", "error", 1.0),
        Probe("a1", "memory_rethink", {"label": "notes"}, "success", "edited", "ok", 2.0),
        Probe(
            "a1",
            "conversation_search",
            {"query": "memprobe", "limit": 7},
            "success",
            "Showing 6 results: " + str([{"content": "memprobe x"}] * 6).replace("'", '"'),
            "count>=6",
            3.0,
        ),
    ]
    assert check_probes(good) == []
    allowed = attrs.evolve(good[0], status="success", text="edited")
    assert any("expected error" in p for p in check_probes([allowed]))
    short = attrs.evolve(good[2], expect="count>=9")
    assert any("expected min(limit, matching) = 7" in p for p in check_probes([short]))


# -- the board: no acknowledged edit is lost --------------------------------------------------
def test_a_board_read_in_some_real_time_order_passes() -> None:
    ops = [
        BoardOp("set", "api-1", 1.0, 2.0),
        BoardOp("append", "tool-1", 3.0, 4.0),
        BoardOp("describe", "described", 4.5, 5.0),
        BoardOp("append", "tool-2", 5.5, None),  # unknown outcome: may or may not show
    ]
    reads = [
        BoardRead("api-1\ntool-1", 4.1, 4.2),
        BoardRead("api-1\ntool-1", 6.0, 6.5),
        BoardRead("api-1\ntool-1\ntool-2", 7.0, 7.5),
    ]
    assert check_board("board", "board-0", ops, reads) == []


def test_a_lost_update_is_named() -> None:
    ops = [
        BoardOp("set", "api-1", 1.0, 2.0),
        BoardOp("append", "tool-1", 2.5, 6.0),  # read api-1 at its start ...
        BoardOp("set", "api-2", 3.0, 4.0),  # ... api-2 landed meanwhile ...
    ]
    stale = [BoardRead("api-1\ntool-1", 6.5, 7.0)]  # ... and the append wrote over it
    problems = check_board("board", "board-0", ops, stale)
    assert any("'api-2' was set after it" in p for p in problems), problems
    ops = [BoardOp("append", "tool-1", 1.0, 2.0), BoardOp("describe", "d", 1.5, 3.0)]
    lost = check_board("board", "board-0", ops, [BoardRead("board-0", 3.5, 4.0)])
    assert any("'tool-1'" in p and "is lost" in p for p in lost), lost
