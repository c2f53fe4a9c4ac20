"""Determinism: equal hashes for a seed in the same process and in fresh processes.

This is the acceptance workload of issue #2: 300 seeds of a 50-task program interleaving through
sleeps, locks, channels, events and cancellation.
"""

import json
import os
import subprocess
import sys

import pytest

import kelpie_dst
from kelpie_dst._determinism import check_determinism
from kelpie_dst.examples import interleave

SEEDS = range(300)

_FRESH = """
import json, sys
import kelpie_dst
from kelpie_dst.examples import interleave
print(json.dumps([kelpie_dst.run(interleave.main, seed=s).trace_hash for s in range(300)]))
"""


def test_300_seeds_same_hash_in_repeat_and_fresh_process() -> None:
    first = [kelpie_dst.run(interleave.main, seed=s) for s in SEEDS]
    assert all(r.ok for r in first)
    repeat = [kelpie_dst.run(interleave.main, seed=s).trace_hash for s in SEEDS]
    assert [r.trace_hash for r in first] == repeat
    env = dict(os.environ, PYTHONHASHSEED="12345")  # a different hash seed on purpose
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH], env=env, capture_output=True, text=True, check=True
    )
    fresh = json.loads(proc.stdout)
    assert fresh == repeat
    distinct = len(set(repeat))
    assert distinct >= 290, distinct  # almost every seed interleaves differently


def test_check_determinism_passes_a_deterministic_program() -> None:
    report = check_determinism("kelpie_dst.examples.interleave:main", seed=11, runs=3)
    assert report.deterministic, report.describe()
    assert [label for label, _ in report.runs] == [
        "in-process",
        "in-process repeat",
        "fresh process 1",
    ]


def test_check_determinism_catches_set_order_dependence() -> None:
    report = check_determinism("kelpie_dst.examples.setorder:main", seed=1, runs=4)
    assert not report.deterministic
    assert report.divergence is not None
    text = report.describe()
    assert "NONDETERMINISTIC" in text
    assert "first divergent event at index" in text
    assert "schedule" in text  # the divergent event is the set-ordered log line


def test_vary_hashseed_catches_string_set_order(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "strset.py"
    module.write_text(
        "import kelpie_dst\n"
        "async def main():\n"
        "    for name in {'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'}:\n"
        "        kelpie_dst.log('visit', name=name)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    report = check_determinism("strset:main", seed=1, runs=5, vary_hashseed=True)
    assert not report.deterministic
    assert report.divergence is not None and report.divergence.left is not None
    assert report.divergence.left.kind == "log"


def test_runs_must_be_at_least_two() -> None:
    with pytest.raises(kelpie_dst.UsageError):
        check_determinism("kelpie_dst.examples.interleave:main", seed=1, runs=1)


async def module_level_program() -> None:
    import trio

    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(trio.sleep, i * 0.1)


def test_assert_deterministic_helper_for_tests() -> None:
    kelpie_dst.assert_deterministic(module_level_program, seeds=range(3))
    kelpie_dst.assert_deterministic("kelpie_dst.examples.bank:main", seeds=[1], runs=2)
    with pytest.raises(kelpie_dst.NondeterminismError, match="first divergent event"):
        kelpie_dst.assert_deterministic("kelpie_dst.examples.setorder:main", seeds=[1], runs=2)


def test_a_local_function_can_only_be_checked_in_process() -> None:
    async def local() -> None:
        pass

    kelpie_dst.assert_deterministic(local, runs=2)
    with pytest.raises(kelpie_dst.UsageError, match="cannot be imported by name"):
        kelpie_dst.assert_deterministic(local, runs=3)


def test_assert_deterministic_fails_when_every_run_fails() -> None:
    # Failing the same way every time is deterministic, but a test that only calls
    # assert_deterministic would pass while its scenario is broken: that is an error too.
    async def broken() -> None:
        raise kelpie_dst.InvariantViolation("balance went negative")

    with pytest.raises(kelpie_dst.ScenarioFailed, match=r"seed=3 failed.*balance went negative"):
        kelpie_dst.assert_deterministic(broken, seeds=[3], runs=2)
    kelpie_dst.assert_deterministic(broken, seeds=[3], runs=2, expect_failure=True)
    kelpie_dst.assert_deterministic(broken, runs=2, expect_failure="went negative")
    with pytest.raises(kelpie_dst.ScenarioFailed, match="not with 'overdraft'"):
        kelpie_dst.assert_deterministic(broken, runs=2, expect_failure="overdraft")


def test_assert_deterministic_expecting_a_failure_fails_when_the_runs_pass() -> None:
    async def fine() -> None:
        pass

    with pytest.raises(kelpie_dst.ScenarioFailed, match=r"seed=0 passed.*was expected"):
        kelpie_dst.assert_deterministic(fine, runs=2, expect_failure=True)
    with pytest.raises(kelpie_dst.ScenarioFailed, match="containing 'boom' was expected"):
        kelpie_dst.assert_deterministic(fine, runs=2, expect_failure="boom")
    assert issubclass(kelpie_dst.ScenarioFailed, AssertionError)
