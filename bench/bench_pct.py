"""PCT hit rates on a depth-3 ordering bug in a three-task, ~30-step program (issue #14).

Runs seeds of ``kelpie_dst/examples/handoff.py`` under four schedulers and prints how many
found the bug: the uniform shuffle; PCT with the fixed 2,000-step horizon it had before issue
#14; PCT with scale-free (log-uniform) change points, what a program without a name gets; and
PCT with the horizon from a calibration run, the default. Also prints PCT's lower bound
1 / (k * n**(d-1)) for the calibrated horizon::

    .venv/bin/python bench/bench_pct.py [SEEDS]

Default: 3,000 seeds (about a minute on an idle core).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable

import kelpie_dst
from kelpie_dst.examples import handoff


def unnamed() -> Awaitable[list[str]]:
    return handoff.main()


unnamed.__qualname__ = "<calibration needs a name>"  # so it gets log-uniform change points

MODES: list[tuple[str, Callable[..., Awaitable[object]], dict[str, object]]] = [
    ("uniform shuffle (random)", handoff.main, {"strategy": "random"}),
    ("pct, fixed horizon 2,000 (before)", handoff.main, {"strategy": "pct", "pct_horizon": 2000}),
    ("pct, log-uniform change points", unnamed, {"strategy": "pct"}),
    ("pct, calibrated horizon (default)", handoff.main, {"strategy": "pct"}),
]


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    horizon = kelpie_dst.run(handoff.main, seed=0).steps
    print(
        f"handoff: {len(handoff.WORKERS)} tasks, calibrated horizon {horizon} steps, {seeds} seeds"
    )
    rates = {}
    for label, program, options in MODES:
        start = time.perf_counter()
        hits = sum(not kelpie_dst.run(program, seed=s, **options).ok for s in range(seeds))  # type: ignore[arg-type]
        rates[label] = hits / seeds
        one_in = f"1 in {seeds / hits:,.0f}" if hits else "never"
        print(f"{label:<38}{hits:6d} hits  ({one_in})  {time.perf_counter() - start:6.1f} s")
    k, d = len(handoff.WORKERS), 3
    print(f"PCT bound 1/(k*n^(d-1)) for n={horizon}: 1 in {k * horizon ** (d - 1):,}")
    before = rates["pct, fixed horizon 2,000 (before)"]
    after = rates["pct, calibrated horizon (default)"]
    if before:
        print(f"calibrated / fixed: {after / before:.0f}x")
    else:
        bound = (horizon / 2000) ** (d - 1)
        print(
            f"fixed horizon: no hit; its rate is at most (n/2000)^2 = 1 in {1 / bound:,.0f}, "
            f"so calibrated is at least {after / bound:.0f}x"
        )


if __name__ == "__main__":
    main()
