"""A depth-3 ordering bug in a three-task, thirty-step program (issue #14's PCT row).

Three workers take ten turns each; in every round each of them takes one turn, and the first to
move in a round *leads* it. Leadership is meant to pass from ``a`` to ``b`` to ``c`` at most once
each, after a settled period, but the planted bug fires only for the exact pattern: ``a`` leads
two or more rounds in a row, then ``b`` two or more, then ``c`` every remaining round (two or
more). That takes one task order held for several rounds, changed twice: a bug of depth 3 in
PCT's terms (an initial priority order and two change points).

A uniform shuffle of each batch finds it about once in 4,000 seeds (15 leader sequences out of
3**10). PCT finds it when its two change points land inside the program; spread over a fixed
2,000 steps they almost never do, spread over the program's estimated length they often do
(bench/bench_pct.py prints both rates).
"""

from __future__ import annotations

import itertools

import trio
import trio.lowlevel

WORKERS = ("a", "b", "c")
ROUNDS = 10


async def main() -> list[str]:
    leaders: list[str] = []
    turns: list[str] = []

    async def worker(name: str) -> None:
        for round_ in range(ROUNDS):
            await trio.lowlevel.checkpoint()
            if len(turns) == round_ * len(WORKERS):
                leaders.append(name)
            turns.append(name)

    async with trio.open_nursery() as nursery:
        for name in WORKERS:
            nursery.start_soon(worker, name)
    runs = [(name, len(list(group))) for name, group in itertools.groupby(leaders)]
    pattern = [name for name, _ in runs] == list(WORKERS)
    assert not (pattern and all(n >= 2 for _, n in runs)), f"handoff bug: leaders {leaders}"
    return leaders
