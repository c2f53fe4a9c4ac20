"""PCT that fits the program (issue #14): a depth-3 ordering bug in a three-task, ~30-step
program, found far more often once the change points are spread over the program's length.

Figures today (kelpie_dst/examples/handoff.py, seeds 0-2999; bench/bench_pct.py prints them):
calibrated horizon 65 hits (1 in 46), log-uniform change points 1 hit, the old fixed 2,000-step
horizon 0 hits. The assertions below are bounds over 400 seeds, not those exact counts.
"""

from __future__ import annotations

import io
import math

import kelpie_dst
from kelpie_dst._sched import MAX_HORIZON, PCTStrategy
from kelpie_dst._trace import decode_trace
from kelpie_dst.examples import handoff

SEEDS = range(400)
DEPTH = 3
TASKS = len(handoff.WORKERS)


def failing(**options: object) -> list[int]:
    return [s for s in SEEDS if not kelpie_dst.run(handoff.main, seed=s, **options).ok]  # type: ignore[arg-type]


def test_the_depth_3_bug_is_found_at_least_10x_as_often_as_with_a_fixed_horizon() -> None:
    horizon = kelpie_dst.run(handoff.main, seed=0).steps  # what the calibration run measures
    fitted = failing(strategy="pct")
    fixed = failing(strategy="pct", pct_horizon=2_000)  # the horizon before issue #14
    rate = len(fitted) / len(SEEDS)
    # With 2,000 steps, both change points must fall inside the program's `horizon` steps:
    # at most (horizon / 2000)**2 per seed, about 1 in 1,800 here.
    assert rate >= 10 * (horizon / 2_000) ** (DEPTH - 1), (fitted, horizon)
    assert len(fixed) <= 1, fixed
    # PCT's guarantee for a calibrated horizon h: at least 1 / (k * h**(d-1)) per seed
    assert rate >= 1 / (TASKS * horizon ** (DEPTH - 1))


def test_the_horizon_comes_from_a_calibration_run_and_replays_in_a_fresh_process() -> None:
    found = next(s for s in SEEDS if not kelpie_dst.run(handoff.main, seed=s, strategy="pct").ok)
    sink = io.BytesIO()
    kelpie_dst.run(handoff.main, seed=found, strategy="pct", trace_file=sink)
    start = next(decode_trace(sink.getvalue()))
    assert start.kind == "run.start"
    assert start.fields["horizon"] == kelpie_dst.run(handoff.main, seed=0).steps
    report = kelpie_dst.check_determinism(
        "kelpie_dst.examples.handoff:main", seed=found, runs=3, options={"strategy": "pct"}
    )
    assert report.deterministic, report.describe()  # the fresh process calibrates alike


def test_without_an_estimate_change_points_are_log_uniform() -> None:
    points = [PCTStrategy(seed, depth=2)._change_points[0] for seed in range(2_000)]
    assert all(1 <= p <= MAX_HORIZON for p in points)
    share = sum(p <= 64 for p in points) / len(points)
    expected = math.log(65) / math.log(MAX_HORIZON)  # about 0.38: each doubling gets 1/16
    assert abs(share - expected) < 0.05, share
