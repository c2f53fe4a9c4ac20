"""The FILTER oracle (``_agent_filters``): pure checks on hand-made listings."""

from __future__ import annotations

from kelpie_dst.workloads._agent_filters import (
    Listed,
    check_filtered,
    check_reference,
    filters,
    plan_tags,
)

NAMES = [f"agent-{n}" for n in range(1, 13)]
MODEL = {f"agent-{n}": plan_tags(n) for n in range(1, 13)}
REFERENCE = [Listed(f"id-{n}", f"agent-{n}", plan_tags(n)) for n in range(1, 13)]


def _filter(label: str):  # type: ignore[no-untyped-def]
    return next(f for f in filters(NAMES) if f.label == label)


def test_filters_keep_what_the_api_documents() -> None:
    def kept(label: str) -> list[str]:
        return [a.name for a in REFERENCE if _filter(label).keep(a)]

    assert kept("name=agent-7") == ["agent-7"]
    assert kept("query_text=AGENT-1") == ["agent-1", "agent-10", "agent-11", "agent-12"]
    assert kept("tags=g0") == [f"agent-{n}" for n in range(2, 13, 2)]
    assert kept("tags=h1,h2") == [f"agent-{n}" for n in range(1, 13) if n % 3]
    assert kept("tags=g1,h0 (all)") == ["agent-3", "agent-9"]


def test_the_model_filtered_is_what_a_correct_listing_gives() -> None:
    flt = _filter("tags=g1,h0 (all)")
    assert check_filtered(REFERENCE, flt, "asc", 1, ["id-3", "id-9"]) == []
    assert check_filtered(REFERENCE, flt, "desc", 2, ["id-9", "id-3"]) == []


def test_a_listing_that_limits_before_it_filters_is_caught() -> None:
    flt = _filter("name=agent-5")
    assert check_filtered(REFERENCE, flt, "asc", 1, []) == [
        "agents list name=agent-5 (asc, pages of 1): got [], want ['id-5']"
    ]
    flt = _filter("tags=g0")
    evens = [f"id-{n}" for n in range(2, 13, 2)]
    assert check_filtered(REFERENCE, flt, "asc", 2, evens[:-1])  # the last page lost
    assert check_filtered(REFERENCE, flt, "asc", 2, [*evens, "id-3"])  # one it should drop
    assert check_filtered(REFERENCE, flt, "desc", 2, evens)  # not reversed


def test_the_reference_must_hold_each_acknowledged_agent_once_with_its_tags() -> None:
    assert check_reference(REFERENCE, MODEL, NAMES, {}) == []
    twice = [*REFERENCE, Listed("id-99", "agent-4", plan_tags(4))]
    assert check_reference(twice, MODEL, NAMES, {}) == [
        "agents list: agent-4 was created once but is listed 2 times (0 create attempts got "
        "no answer)"
    ]
    assert check_reference(twice, MODEL, NAMES, {"agent-4": 1}) == []  # a late blind attempt
    missing = REFERENCE[1:]
    assert check_reference(missing, MODEL, NAMES, {}) == [
        "agents list: agent-1 was acknowledged but is not listed"
    ]
    assert check_reference(missing, MODEL, NAMES[1:], {}) == []  # never acknowledged
    retagged = [Listed("id-1", "agent-1", ("g0",)), *REFERENCE[1:]]
    assert check_reference(retagged, MODEL, NAMES, {}) == [
        "agents list: agent-1 has tags ['g0'], not ['g1', 'h1']"
    ]
    stray = [*REFERENCE, Listed("id-x", "intruder", ())]
    assert check_reference(stray, MODEL, NAMES, {}) == [
        "agents list: id-x named 'intruder', which the workload never made"
    ]
