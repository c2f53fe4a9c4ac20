"""The LIST oracle (``_agent_lists``): the pure checkers pass correct listings and catch each
kind of paging bug; the walker reads a list the four ways through a pager with Letta's cursor
semantics (the service's own, and planted wrong ones); a scenario with ``list_walks`` passes
and repeats itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import trio

from kelpie_agent.service._types import paginate
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_lists import Walk, check_model, check_walks, walk

ITEMS = [f"x{n}" for n in range(7)]


def test_walks_that_read_the_list_pass() -> None:
    walks = [
        Walk("asc", "after", 3, tuple(ITEMS), 3),
        Walk("desc", "before", 2, tuple(ITEMS[::-1]), 2),
    ]
    assert check_walks("a1 blocks", ITEMS, walks) == []


@pytest.mark.parametrize(
    ("ids", "said"),
    [
        (["x0", "x1", "x2", "x2", "x3", "x4", "x5", "x6"], "twice ['x2']"),
        (["x0", "x1", "x3", "x4", "x5", "x6"], "missing ['x2']"),
        (["x0", "x1", "x2", "x3", "x4", "x5", "x6", "y"], "not in the list ['y']"),
        (["x1", "x0", "x2", "x3", "x4", "x5", "x6"], "out of order"),
    ],
)
def test_a_wrong_walk_is_caught_and_said(ids: list[str], said: str) -> None:
    problems = check_walks("a1 runs", ITEMS, [Walk("asc", "after", 2, tuple(ids), 2)])
    assert (
        len(problems) == 1
        and said in problems[0]
        and "a1 runs read asc by 'after'" in (problems[0])
    )


def test_a_page_longer_than_its_limit_is_caught_even_when_the_ids_add_up() -> None:
    problems = check_walks("agents", ITEMS, [Walk("desc", "after", 2, tuple(ITEMS[::-1]), 3)])
    assert problems == [
        "agents read desc by 'after' in pages of 2: a page of 3 items (the limit was 2)"
    ]


def test_the_model_checks() -> None:
    page = [("b1", "persona"), ("b2", "human"), ("b3", "rules")]
    assert check_model("a1 blocks", page, exact=["persona", "human", "rules"]) == []
    assert check_model("a1 blocks", page, exact=["human", "persona", "rules"]) != []
    runs = [("r2", "r2"), ("r1", "r1"), ("r3", "r3")]
    assert check_model("a1 runs", runs, must=["r2", "r3"], ordered=True) == []
    assert (
        "not in the order made" in check_model("a1 runs", runs, must=["r1", "r2"], ordered=True)[0]
    )
    assert "not listed" in check_model("a1 runs", runs, must=["r4"])[0]
    assert "does not have" in check_model("agents", runs, may=["r1", "r2"])[0]
    assert "twice" in check_model("agents", [("a", "a"), ("a", "a")])[0]


Pager = Callable[[Sequence[str], str, str | None, str | None, int], list[str]]


def _service_pager(
    items: Sequence[str], order: str, after: str | None, before: str | None, limit: int
) -> list[str]:
    return paginate(
        items,
        lambda i: i,
        kind="item",
        after=after,
        before=before,
        limit=limit,
        descending=order == "desc",
    )


def _takes_oldest(
    items: Sequence[str], order: str, after: str | None, before: str | None, limit: int
) -> list[str]:
    """``paginate-descending-takes-oldest`` (a page cut before it is reversed): every page is
    the far end of its window, the oldest items newest first, the oldest before a cursor."""
    whole = _service_pager(items, order, after, before, len(items))
    return whole[-limit:] if order == "desc" else whole[:limit]


def _walks(pager: Pager, size: int) -> list[Walk]:
    async def fetch(
        order: str, after: str | None, before: str | None, limit: int
    ) -> list[tuple[str, str]]:
        return [(i, i) for i in pager(ITEMS, order, after, before, limit)]

    async def main() -> list[Walk]:
        return [
            await walk(fetch, order, cursor, size, ITEMS[-1] if order == "asc" else ITEMS[0])
            for order in ("asc", "desc")
            for cursor in ("after", "before")
        ]

    return trio.run(main)


@pytest.mark.parametrize("size", [1, 2, 3, 6])
def test_the_service_pager_reads_the_same_every_way(size: int) -> None:
    walks = _walks(_service_pager, size)
    assert len(walks) == 4 and all(w.longest <= size for w in walks)
    assert check_walks("items", ITEMS, walks) == []


def test_a_pager_that_takes_the_oldest_newest_first_is_caught() -> None:
    problems = check_walks("items", ITEMS, _walks(_takes_oldest, 3))
    assert [p.split(":")[0] for p in problems] == [
        "items read asc by 'before' in pages of 3",
        "items read desc by 'after' in pages of 3",
    ]


def _after_inclusive(
    items: Sequence[str], order: str, after: str | None, before: str | None, limit: int
) -> list[str]:
    """A pager whose ``after`` cursor is inclusive: a page starts at its cursor."""
    if before is not None:
        return _service_pager(items, order, after, before, limit)
    listed = list(items) if order == "asc" else list(items)[::-1]
    start = listed.index(after) if after is not None else 0
    return listed[start : start + limit]


@pytest.mark.parametrize("size", [1, 3])
def test_an_inclusive_cursor_is_caught_and_a_stuck_one_ends_the_walk(size: int) -> None:
    problems = check_walks("items", ITEMS, _walks(_after_inclusive, size))
    assert [p.split(":")[0] for p in problems] == [
        f"items read asc by 'after' in pages of {size}",
        f"items read desc by 'after' in pages of {size}",
    ]
    assert all("twice" in p for p in problems)


SMALL = ("workload.params.agents=3", "workload.params.messages=2", "workload.params.clients=2")


def test_agent_conversations_walks_its_lists_and_repeats_itself() -> None:
    scenario = load_scenario("agent_conversations", list(SMALL))
    first, again = run_scenario(scenario, 4), run_scenario(scenario, 4)
    failure = first.result.failure
    assert first.ok, f"{failure and failure.describe()}\n{first.replay_line()}"
    assert first.metrics["lists.walks"] >= 4 and first.metrics["lists.pages"] > 10
    assert first.metrics["burst.acked"] == 6  # create_burst = 6: each made exactly one agent
    assert first.metrics["agents.listed"] == first.metrics["agents.created"] + 6
    assert first.result.trace_hash == again.result.trace_hash


def test_create_burst_needs_list_walks() -> None:
    scenario = load_scenario("agent_conversations", ["workload.params.list_walks=0"])
    got = run_scenario(scenario, 0)
    assert not got.ok and got.result.failure is not None
    assert "workload.params.create_burst: needs list_walks" in got.result.failure.describe()
