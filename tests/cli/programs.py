"""Entry points for the CLI tests."""

from __future__ import annotations

import trio
import trio.lowlevel


async def brackets() -> None:
    table: dict[str, int] = {"[a]": 1}
    await trio.sleep(1)
    table["[b]"] += table["[a]"]  # KeyError: '[b]'


# -- state that survives between seeds run in one process (issue #14, item 6) ----------------
_RUNS: list[int] = []


def _remember(seed_runs: list[int] = []) -> int:  # noqa: B006  (the leak under test)
    seed_runs.append(1)
    return len(seed_runs)


async def leaky() -> None:
    """Passes alone in a process; after another seed in the same process it sleeps more (a
    different trace) and fails, because a module-level list and a mutable default argument
    remember the earlier runs."""
    _RUNS.append(1)
    _remember()
    for _ in range(len(_RUNS)):
        await trio.sleep(1)
    assert len(_RUNS) == 1, f"ran after {len(_RUNS) - 1} earlier seed(s) in this process"


async def flaky_by_seed() -> None:
    """Fails on odd seeds, the same way in any process (a real, reproducible failure)."""
    import kelpie_dst

    sim = kelpie_dst.current_simulation()
    assert sim is not None
    await trio.sleep(1)
    assert sim.seed % 2 == 0, f"odd seed {sim.seed}"


async def busy() -> None:
    """A quarter of a second or so of CPU per seed, with a seed-dependent schedule (for the
    tests that kill a sweep's worker while it runs a seed)."""
    import kelpie_dst

    sim = kelpie_dst.current_simulation()
    assert sim is not None

    async def spin(n: int) -> None:
        for _ in range(n):
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        for i in range(4):
            nursery.start_soon(spin, 5_000 + (sim.seed * 7 + i) % 13)
