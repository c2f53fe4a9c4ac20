"""The pure checks of a run's parts read whole and by limit (``_run_limited_reads``), on
hand-made reads: each passes a correct one and catches a planted violation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from kelpie_dst.workloads._run_limited_reads import (
    LimitedRead,
    PartReads,
    RunParts,
    Span,
    check_filtered_threads,
    check_limited,
    check_part_reads,
    check_run_trace,
    limits_for,
    read_run_parts,
)

RUN = "run-1"
STEPS = ("step-a", "step-b")


def _parts(spans: Sequence[Span] | None = None) -> RunParts:
    if spans is None:
        spans = [Span(RUN, RUN, None, "agent_run")]
        spans += [Span(s, RUN, RUN, "agent_step") for s in STEPS]
    return RunParts(RUN, tuple(spans), STEPS, ("m1", "m2", "m3"))


def test_limits_cover_the_smallest_and_the_length() -> None:
    assert limits_for(0) == [1, 2]
    assert limits_for(1) == [1, 2]
    assert limits_for(3) == [1, 2, 3, 4]
    assert limits_for(1000) == [1, 2, 999, 1000]


def test_a_trace_is_the_run_then_its_steps() -> None:
    assert check_run_trace(_parts()) == []
    root, a, b = _parts().spans
    assert "first span" in check_run_trace(_parts([a, root, b]))[0]
    assert "not its steps" in check_run_trace(_parts([root, b, a]))[0]
    assert "not its steps" in check_run_trace(_parts([root, a]))[0]
    orphan = Span("step-b", RUN, None, "agent_step")
    assert "not a step of the run" in check_run_trace(_parts([root, a, orphan]))[0]
    assert "no span" in check_run_trace(_parts([]))[0]


def test_a_limited_read_is_the_start_of_the_whole() -> None:
    whole = {RUN: _parts()}
    good = [
        LimitedRead(RUN, "trace", 2, (RUN, "step-a")),
        LimitedRead(RUN, "steps", 3, STEPS),
        LimitedRead(RUN, "messages", 1, ("m1",)),
    ]
    assert check_limited(whole, good) == []
    over = LimitedRead(RUN, "trace", 1, (RUN, "step-a"))
    assert "limit 1 answered 2 item(s)" in check_limited(whole, [over])[0]
    short = LimitedRead(RUN, "messages", 3, ("m1", "m2"))
    assert "first 3" in check_limited(whole, [short])[0]
    shifted = LimitedRead(RUN, "steps", 1, ("step-b",))
    assert check_limited(whole, [shifted])
    assert check_limited({}, [over]) == []  # a run not judged


def _fetch(answers: dict[str, list[Any]], changing: bool = False) -> Any:
    calls = [0]

    async def fetch(run_id: str, route: str, limit: int) -> list[Any] | None:
        calls[0] += 1
        found = answers[route]
        if changing and route == "messages" and calls[0] > 3:
            found = [*found, {"id": "m-late"}]
        return found[:limit]

    return fetch


def test_reads_are_judged_only_when_the_run_stood_still() -> None:
    spans = [
        {"span_id": RUN, "trace_id": RUN, "parent_span_id": None, "span_name": "agent_run"},
        {"span_id": "step-a", "trace_id": RUN, "parent_span_id": RUN, "span_name": "agent_step"},
    ]
    answers = {"trace": spans, "steps": [{"id": "step-a"}], "messages": [{"id": "m1"}]}

    async def main() -> tuple[PartReads, PartReads]:
        still, moving = PartReads(), PartReads()
        await read_run_parts(_fetch(answers), RUN, still)
        await read_run_parts(_fetch(answers, changing=True), RUN, moving)
        return still, moving

    still, moving = trio.run(main)
    assert list(still.whole) == [RUN] and still.unsettled == 0
    assert {(r.route, r.limit) for r in still.limited} == {
        ("trace", 1),
        ("trace", 2),
        ("trace", 3),
        ("steps", 1),
        ("steps", 2),
        ("messages", 1),
        ("messages", 2),
    }
    assert check_part_reads(still) == []
    assert moving.whole == {} and moving.unsettled == 1


def test_a_conversation_filter_lists_exactly_its_messages() -> None:
    own = ("m1", "m2", "m3")
    assert check_filtered_threads({"conv-1": (own, ("m2", "m1", "m3"))}) == []
    other = check_filtered_threads({"conv-1": (own, ("m1", "x9"))})
    assert "missing ['m2', 'm3'], extra ['x9']" in other[0]
    assert check_filtered_threads({"conv-1": (own, ())})
