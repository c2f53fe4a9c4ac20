"""The agent_collections scenario: collections larger than any chunk the server reads them in.
A small run repeats its trace; the checks name each way a collection can come back short,
long or out of order."""

from __future__ import annotations

import attrs

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._collections_checks import CollectionsLog, Listing, check_collections
from kelpie_dst.workloads.agent_collections import _either_side, _lengthened, _probes


def test_a_small_run_passes_and_repeats_its_trace() -> None:
    """The shipped sizes run in the short sweep (tests/cli/test_sweep.py); here a small
    world, twice."""
    scenario = load_scenario(
        "agent_collections", ("workload.params.agents=12", "workload.params.history=30")
    )
    first, again = run_scenario(scenario, 3), run_scenario(scenario, 3)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["collections.agents"] == 12
    assert first.metrics["collections.notes"] == 30
    assert first.metrics["collections.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


IDS = tuple(f"agent-{i:03d}" for i in range(7))


def _listing(**changes: object) -> Listing:
    good = Listing("agents (0)", IDS, tuple(reversed(IDS)), IDS, (3, 3, 1), 3)
    return attrs.evolve(good, **changes)


def _log(**changes: object) -> CollectionsLog:
    log = CollectionsLog(page=3, acked=list(IDS), listings=[_listing()])
    log.before_repair = log.after_repair = IDS
    log.histories = {"agent-000": (("m1", "m2"), ("m1", "m2"))}
    log.notes = ("n0", "n1", "n2")
    log.big, log.big_texts, log.forked = "big", ("boot", "n0", "n1", "n2"), ("n0", "n1", "n2")
    log.found, log.exported = ("n2",), 3
    log.leftovers = [("a reset", (), 0)]
    for name, value in changes.items():
        setattr(log, name, value)
    return log


def test_a_whole_world_has_no_problems() -> None:
    assert check_collections(_log()) == []


def test_each_short_long_or_reordered_listing_is_named() -> None:
    cases = {
        "listed twice": _listing(full=(*IDS, IDS[0]), desc=(IDS[0], *reversed(IDS))),
        "not the ascending one": _listing(desc=IDS),
        "they part at position 6": _listing(walk=IDS[:6], pages=(3, 3, 0)),
        "page 1 of a walk has 2 ids": _listing(pages=(3, 2, 2)),
    }
    for words, seen in cases.items():
        problems = check_collections(_log(listings=[seen]))
        assert any(words in p for p in problems), (words, problems)


def test_an_acknowledged_agent_or_block_missing_from_a_listing_is_named() -> None:
    short = _listing(full=IDS[:6], desc=tuple(reversed(IDS[:6])), walk=IDS[:6], pages=(3, 3, 0))
    (problem,) = check_collections(_log(listings=[short]))
    assert problem == "agents (0): 1 of 7 acknowledged are not listed, e.g. agent-006"
    blocks = attrs.evolve(short, what="blocks (1)")
    (problem,) = check_collections(_log(listings=[blocks], blocks=list(IDS)))
    assert problem.startswith("blocks (1): 1 of 7 acknowledged")


def test_a_tag_filter_and_repair_are_judged() -> None:
    tagged = [("bulk-1", IDS[1:3], IDS[1:4])]
    assert check_collections(_log(tagged=tagged)) == [
        "agents tagged 'bulk-1': the filter listed 2, the full listing has 3 with the tag"
    ]
    problems = check_collections(_log(after_repair=IDS[:5]))
    assert problems == [
        "repair changed the agent listing: 7 before, 5 after, 2 gone (e.g. agent-005)"
    ]
    histories = {"agent-003": (("m1", "m2"), ("m1",))}
    assert check_collections(_log(histories=histories)) == [
        "repair changed 1 agents' histories, e.g. agent-003: 2 messages before, 1 after"
    ]


def test_a_long_history_must_read_back_whole_and_deletes_leave_nothing() -> None:
    assert "missing e.g. 'n1'" in check_collections(_log(big_texts=("n0", "n2")))[0]
    assert "twice e.g. 'n1'" in check_collections(_log(big_texts=("n0", "n1", "n1", "n2")))[0]
    assert "out of order" in check_collections(_log(big_texts=("n1", "n0", "n2")))[0]
    assert "a fork of the imported history of 3 notes shows 2" in check_collections(
        _log(forked=("n0", "n2"))
    )
    assert check_collections(_log(fork_lost="conv-1: not found")) == [
        "the fork just made of the imported history is not found: conv-1: not found"
    ]
    assert "found 1 message(s), not 'n2'" in check_collections(_log(found=("n1",)))[0]
    assert check_collections(_log(exported=2)) == [
        "the export of the imported agent carries 2 of its notes"
    ]
    assert check_collections(_log(leftovers=[("a reset", ("m7",), 1)])) == [
        "after a reset: 1 note(s) still readable by id (e.g. m7), 1 still in the history"
    ]


def test_probes_sit_either_side_of_every_chunk_boundary() -> None:
    ids = [f"m{i}" for i in range(520)]
    assert _probes(ids) == [
        f"m{i}" for i in (0, 63, 64, 99, 100, 127, 128, 199, 200, 255, 256, 499, 500, 519)
    ]
    assert _probes(ids, (200, 500)) == [f"m{i}" for i in (0, 199, 200, 499, 500, 519)]
    assert _probes(["only"]) == ["only"]
    assert _either_side(["b", "c", "a"]) == ["a", "c"]  # by id, where their records are


def test_a_lengthened_file_keeps_its_messages_and_appends_the_notes() -> None:
    import json

    boot = {"role": "system", "id": "message-0", "content": [{"type": "text", "text": "sys"}]}
    file = {"agents": [{"name": "old", "messages": [boot], "in_context_message_ids": []}]}
    agent = json.loads(_lengthened(file, ("n0", "n1"), "long"))["agents"][0]
    assert agent["name"] == "long"
    assert [m["id"] for m in agent["messages"]] == ["message-0", "message-1", "message-2"]
    assert [m["content"][0]["text"] for m in agent["messages"]] == ["sys", "n0", "n1"]
    assert {m["role"] for m in agent["messages"][1:]} == {"user"}
    assert agent["in_context_message_ids"] == ["message-0"]
