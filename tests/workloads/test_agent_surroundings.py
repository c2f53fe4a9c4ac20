"""agent_surroundings: archives and the vector search, identities, folders shared by agents,
under faults. The scenario passes and repeats its trace; the oracle names hand-made bad
histories."""

from __future__ import annotations

from typing import Any

import attrs

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._surroundings_checks import (
    MISSING,
    ScheduleSeen,
    SearchSeen,
    SurroundingsLog,
    check_folders,
    check_identities,
    check_numbered,
    check_respelled,
    check_schedules,
    check_searches,
    check_ties,
    cosine,
)


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_surroundings")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["surroundings.searches"] > 10
    assert first.metrics["surroundings.hits"] > 10
    assert first.metrics["surroundings.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def test_the_search_ranks_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_search_ranks")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["surroundings.numbered"] >= 6
    assert first.metrics["surroundings.zero_queries"] >= 1
    assert first.metrics["surroundings.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _search(**changes: Any) -> SearchSeen:
    """A search of two certain passages, both answered, best first."""
    search = SearchSeen(
        agent="agent-1",
        query="kelp",
        tags=(),
        mode="any",
        top_k=5,
        start=10.0,
        end=20.0,
        certain=frozenset({"kelp tide", "reef"}),
        possible=frozenset({"kelp tide", "reef"}),
        model={"kelp tide": 0.7, "reef": 0.0},
        created={"kelp tide": 10.0, "reef": 20.0},
        tagged={"kelp tide": frozenset(), "reef": frozenset({"red"})},
        hits=(("kelp tide", 0.7, 10.0, frozenset()), ("reef", 0.0, 20.0, frozenset({"red"}))),
    )
    return attrs.evolve(search, **changes)


def test_a_consistent_search_passes() -> None:
    assert check_searches([_search()]) == []
    assert cosine([1.0, 0.0], [1.0, 0.0]) == 1.0 and cosine([0.0], [1.0]) == 0.0


def test_a_score_that_is_not_the_cosine_is_named() -> None:
    hits: tuple[tuple[str, float, float, frozenset[str]], ...] = (
        ("kelp tide", 0.5, 10.0, frozenset()),
        ("reef", 0.0, 20.0, frozenset({"red"})),
    )
    [problem] = check_searches([_search(hits=hits)])
    assert "scored 0.5, but its cosine similarity is 0.7" in problem


def test_a_passage_at_the_end_of_the_range_left_out_is_named() -> None:
    problems = check_searches([_search(hits=(("kelp tide", 0.7, 10.0, frozenset()),))])
    assert any("must be between 2 and 2" in p for p in problems)
    assert any("left out ['reef']" in p for p in problems)


def test_a_worse_hit_answered_instead_of_a_better_one_is_named() -> None:
    search = _search(top_k=1, hits=(("reef", 0.0, 20.0, frozenset({"red"})),))
    [problem] = check_searches([search])
    assert "left out ['kelp tide']" in problem


def test_a_hit_out_of_order_outside_the_filters_or_memory_is_named() -> None:
    flipped = _search(hits=tuple(reversed(_search().hits)))
    assert any("not best first" in p for p in check_searches([flipped]))
    tagged = _search(tags=("red",), hits=_search().hits)
    assert any("outside the filters: 'kelp tide'" in p for p in check_searches([tagged]))
    stranger = _search(hits=(*_search().hits, ("gone", 0.1, 12.0, frozenset())))
    assert any("outside the agent's archival memory" in p for p in check_searches([stranger]))


def test_identity_keys_name_one_identity() -> None:
    good = SurroundingsLog(
        identity_creates=[("user-0", "made:identity-a", False), ("user-0", "refused", True)],
        identity_keys={"identity-a": "user-0"},
        identity_list=[("identity-a", "user-0")],
        identity_lookups=[("user-0", "identity-a", "user-0"), ("user-9", None, None)],
        identity_agents=[("identity-a", frozenset({"agent-2"}), frozenset({"agent-2"}))],
    )
    assert check_identities(good) == []
    bad = attrs.evolve(
        good,
        identity_creates=[
            ("user-0", "made:identity-a", False),
            ("user-0", "made:identity-b", True),
        ],
        identity_list=[("identity-a", "user-0"), ("identity-b", "user-0")],
        identity_agents=[("identity-a", frozenset({"agent-2"}), frozenset())],
    )
    problems = check_identities(bad)
    assert any("held by an identity, succeeded" in p for p in problems)
    assert any("more than one identity: ['user-0']" in p for p in problems)
    assert any("answers [], not ['agent-2']" in p for p in problems)
    refused = attrs.evolve(good, identity_creates=[("user-1", "refused", False)])
    assert any("which no identity held, was refused" in p for p in check_identities(refused))
    deleted = attrs.evolve(good, identity_deleted=["identity-a"])
    problems = check_identities(deleted)
    assert any("identity-a is listed after its delete" in p for p in problems)
    assert any("looks up identity-a, which was deleted" in p for p in problems)
    missing = attrs.evolve(good, identity_lookups=[("user-9", MISSING, None)])
    assert check_identities(missing) == [
        "identity key 'user-9' names an identity that does not exist"
    ]


def test_folder_names_are_unique_and_a_detach_leaves_other_agents_files() -> None:
    good = SurroundingsLog(
        uploads=[("notes.txt", "notes.txt"), ("notes.txt", "notes_(1).txt"), ("notes.txt", None)],
        folder_names=["notes.txt", "notes_(1).txt", "notes_(2).txt"],
        open_before=frozenset({"file-a"}),
        open_after=frozenset({"file-a"}),
        detached_listed=0,
    )
    assert check_folders(good) == []
    bad = attrs.evolve(
        good,
        uploads=[("notes.txt", "notes_(1).txt"), ("notes.txt", "notes_(1).txt")],
        folder_names=["notes_(1).txt", "notes_(1).txt", "other.txt"],
        open_after=frozenset(),
        detached_listed=2,
    )
    problems = check_folders(bad)
    assert any("same file name: ['notes_(1).txt']" in p for p in problems)
    assert any("more than once" in p for p in problems)
    assert any("changed another's open files" in p for p in problems)
    assert any("lists 2 files" in p for p in problems)
    renamed = attrs.evolve(good, uploads=[("notes.txt", "notes (1).txt")])
    assert any("was named 'notes (1).txt'" in p for p in check_folders(renamed))


def test_a_search_that_depends_on_case_or_stop_words_is_named() -> None:
    same = (("kelp tide", 0.7), ("reef", 0.0))
    log = SurroundingsLog(respelled=[("kelp", "The KELP of it", same, same)])
    assert check_respelled(log) == []
    log.respelled.append(("kelp", "The KELP of it", same, (("reef", 0.2), ("kelp tide", 0.1))))
    [problem] = check_respelled(log)
    assert "case and stop words must not matter" in problem


def _zero(**changes: Any) -> SearchSeen:
    """A query of stop words alone over three certain passages: every score is 0, so the
    hits are the top_k of smallest id."""
    texts = ("kelp", "reef", "tide")
    search = SearchSeen(
        agent="agent-1",
        query="the of it",
        tags=(),
        mode="any",
        top_k=2,
        start=None,
        end=None,
        certain=frozenset(texts),
        possible=frozenset(texts),
        model=dict.fromkeys(texts, 0.0),
        created=dict.fromkeys(texts, 10.0),
        tagged=dict.fromkeys(texts, frozenset()),
        hits=(("tide", 0.0, 10.0, frozenset()), ("kelp", 0.0, 10.0, frozenset())),
        hit_ids=("p-1", "p-2"),
        ids={"tide": "p-1", "kelp": "p-2", "reef": "p-3"},
        zero_query=True,
    )
    return attrs.evolve(search, **changes)


def test_tied_hits_come_in_passage_id_order() -> None:
    assert check_ties([_zero()]) == []
    assert check_ties([_search()]) == []  # no ids recorded: nothing judged
    flipped = _zero(hit_ids=("p-2", "p-1"), ids={"tide": "p-2", "kelp": "p-1", "reef": "p-3"})
    assert any("not in passage id order" in p for p in check_ties([flipped]))
    # in id order, but not the smallest ids: the cut kept a later passage
    later = _zero(
        hits=(("tide", 0.0, 10.0, frozenset()), ("reef", 0.0, 10.0, frozenset())),
        hit_ids=("p-1", "p-3"),
    )
    [problem] = check_ties([later])
    assert "of smallest id ['p-1', 'p-2']" in problem
    # a passage of unknown outcome in scope: the cut is not judged (order still is)
    unsure = attrs.evolve(later, certain=frozenset({"tide", "reef"}))
    assert check_ties([unsure]) == []
    # hits with different scores may come in any id order
    ranked = _search(hit_ids=("p-9", "p-1"), ids={"kelp tide": "p-9", "reef": "p-1"})
    assert check_ties([ranked]) == []


def test_a_number_only_one_passage_holds_finds_it_first() -> None:
    text = "parcel 4417 left the depot"
    good = SurroundingsLog(numbered=[("4417", text, ((text, 0.8), ("parcel 5823 left", 0.2)))])
    assert check_numbered(good) == []
    tied = SurroundingsLog(numbered=[("4417", text, ((text, 0.5), ("parcel 5823 left", 0.5)))])
    assert "no better than" in check_numbered(tied)[0]
    other = SurroundingsLog(numbered=[("4417", text, (("parcel 5823 left", 0.5), (text, 0.5)))])
    assert (
        "not 'parcel 4417 left the depot' (the one passage holding it) first"
        in (check_numbered(other)[0])
    )
    assert check_numbered(SurroundingsLog(numbered=[("4417", text, ())]))


def _schedules(**changes: Any) -> SurroundingsLog:
    """Two schedules of the epoch's first minute (Thursday 1 January 2026, 00:00:10 UTC)."""
    start = 1_767_225_610.0
    log = SurroundingsLog(
        schedules=[
            ScheduleSeen("0 9 * * 1-5", None, start, start + 1, "s-1", 1_767_258_000.0),
            ScheduleSeen(None, start + 600, start, start + 1, "s-2", start + 600),
        ],
        schedule_listed=[("s-1", start, "s-1"), ("s-2", start + 0.5, "s-2")],
        schedule_pages=[(1, [True, False], [["s-1"], ["s-2"]]), (2, [False], [["s-1", "s-2"]])],
    )
    return attrs.evolve(log, **changes)


def test_schedules_read_back_as_created_and_paged() -> None:
    assert check_schedules(_schedules(), 5.0) == []
    late = _schedules()
    late.schedules[0].next_at = 1_767_258_000.0 + 86_400  # Friday 9:00, not Thursday's
    assert any("next time" in p for p in check_schedules(late, 5.0))
    pages = _schedules(schedule_pages=[(2, [True, False], [["s-1", "s-2"], []])])
    assert any(
        "has_next_page [True, False], not [False, False]" in p for p in check_schedules(pages, 5.0)
    )
    gone = _schedules(schedule_gone=[("s-2", False)])
    assert any("deleted, yet still found or listed" in p for p in check_schedules(gone, 5.0))


def test_duplicate_handling_is_judged() -> None:
    log = SurroundingsLog(
        uploads=[("notes.txt", "notes.txt")],
        error_refused=False,
        skip_name="notes_(1).txt",
        replaced=("file-old", "file-new", frozenset({"file-old", "file-new"})),
    )
    problems = check_folders(log)
    assert any("duplicate_handling=error was stored" in p for p in problems)
    assert any("with skip answered the file 'notes_(1).txt'" in p for p in problems)
    assert any("file-old must be gone" in p for p in problems)


def test_a_deleted_archive_or_folder_left_behind_is_named() -> None:
    good = SurroundingsLog(
        archive_names=("archive-1", ["archive-1"], []),
        archive_gone=("archive-1", False, []),
        folder_gone=(0, 0, False),
    )
    assert check_folders(good) == []
    bad = SurroundingsLog(
        archive_names=("archive-1", ["archive-1"], ["archive-1"]),
        archive_gone=("archive-1", False, ["agent-1"]),
        folder_gone=(2, 0, True),
    )
    problems = check_folders(bad)
    assert any("archive-1's rename" in p for p in problems)
    assert any("attached to ['agent-1']" in p for p in problems)
    assert any("lists 2 of its files" in p for p in problems)


def test_a_rename_that_restates_its_key_must_be_taken_and_listed() -> None:
    good = SurroundingsLog(
        identity_keys={"identity-a": "user-0"},
        identity_list=[("identity-a", "user-0")],
        identity_renames=[("identity-a", "user-0 renamed", "ok")],
        identity_names={"identity-a": "user-0 renamed"},
    )
    assert check_identities(good) == []
    refused = attrs.evolve(good, identity_renames=[("identity-a", "user-0 renamed", "refused: x")])
    problems = check_identities(refused)
    assert any("restated its own identifier key was refused" in p for p in problems)
    stale = attrs.evolve(good, identity_names={"identity-a": "User 0"})
    assert any("listed as 'User 0' after its rename" in p for p in check_identities(stale))
