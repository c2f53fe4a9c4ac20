"""A planted race that needs one specific ordering: worker 0 first in every round.

Eight workers run four rounds; in each round every worker takes a turn. The bug fires only when
worker 0 goes first in all four rounds. A uniform shuffle of each batch makes that a 1 in 8**4
event; a PCT scheduler, which gives worker 0 a high priority for the whole run with probability
1/8, finds it in a handful of seeds.
"""

from __future__ import annotations

import trio
import trio.lowlevel

WORKERS = 8
ROUNDS = 4


async def main() -> None:
    firsts: list[int] = []
    turns: list[int] = []

    async def worker(i: int) -> None:
        for round_ in range(ROUNDS):
            await trio.lowlevel.checkpoint()
            if len(turns) == round_ * WORKERS:
                firsts.append(i)
            turns.append(i)

    async with trio.open_nursery() as nursery:
        for i in range(WORKERS):
            nursery.start_soon(worker, i)
    assert firsts != [0] * ROUNDS, "race: worker 0 won every round"
