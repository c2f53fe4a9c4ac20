"""kelpie_dst.run: virtual time, results, and how failures are classified."""

import math

import pytest
import trio

import kelpie_dst
from kelpie_dst import FailureKind


def test_virtual_time_starts_at_zero_and_jumps() -> None:
    seen = []

    async def main() -> float:
        seen.append(trio.current_time())
        await trio.sleep(3600 * 24 * 365)  # a year
        return trio.current_time()

    result = kelpie_dst.run(main, seed=1)
    assert result.ok
    assert seen == [0.0]
    assert result.value == 3600 * 24 * 365
    assert result.virtual_time == 3600 * 24 * 365
    assert result.wall_seconds < 60  # sanity only: a year of virtual time did not take a year


def test_main_may_take_the_simulation() -> None:
    async def main(sim: kelpie_dst.Simulation) -> int:
        assert kelpie_dst.current_simulation() is sim
        return sim.seed

    assert kelpie_dst.run(main, seed=42).value == 42
    assert kelpie_dst.current_simulation() is None


def test_main_with_two_required_arguments_is_a_usage_error() -> None:
    async def main(a: int, b: int) -> None: ...

    with pytest.raises(kelpie_dst.UsageError, match="no arguments or one"):
        kelpie_dst.run(main)


def test_result_fields_and_summary_line() -> None:
    async def main() -> None:
        kelpie_dst.log("hello", n=1)
        await trio.sleep(2.5)

    result = kelpie_dst.run(main, seed=7)
    assert result.seed == 7
    assert len(result.trace_hash) == 32
    assert result.events > 3
    assert result.summary_line() == (
        f"seed=7 trace_hash={result.trace_hash} virtual_time=2.500000 events={result.events}"
    )
    assert result.exit_code == 0


def test_assertion_is_an_invariant_failure() -> None:
    async def main() -> None:
        await trio.sleep(1)
        assert 1 + 1 == 3, "arithmetic broke"

    result = kelpie_dst.run(main)
    assert result.failure is not None
    assert result.failure.kind is FailureKind.INVARIANT
    assert result.exit_code == 1
    assert "arithmetic broke" in result.failure.message
    assert "test_runner.py" in result.failure.details
    assert result.failure.virtual_time == 1.0


def test_invariant_violation_error_is_an_invariant_failure() -> None:
    async def main() -> None:
        raise kelpie_dst.InvariantViolation("lost an acknowledged write")

    result = kelpie_dst.run(main)
    assert result.failure is not None and result.failure.kind is FailureKind.INVARIANT


def test_other_exception_in_a_child_task_is_a_crash() -> None:
    async def child() -> None:
        await trio.sleep(0.5)
        raise KeyError("missing")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
            await trio.sleep(10)

    result = kelpie_dst.run(main)
    assert result.failure is not None
    assert result.failure.kind is FailureKind.CRASH
    assert result.failure.message == "KeyError: 'missing'"
    assert "in child" in result.failure.details
    # the simulator's own frames and nursery groups are trimmed from the report
    assert "kelpie_dst/_runner.py" not in result.failure.details
    assert "ExceptionGroup" not in result.failure.details


def test_deadlock_is_a_liveness_failure_that_lists_blocked_tasks() -> None:
    from kelpie_dst.examples import deadlock

    result = kelpie_dst.run(deadlock.main, seed=3)
    assert result.failure is not None
    assert result.failure.kind is FailureKind.LIVENESS
    assert result.exit_code == 2
    assert "deadlock" in result.failure.message
    assert "deadlock.main.<locals>.left" in result.failure.details
    assert "deadlock.main.<locals>.right" in result.failure.details
    assert "deadlock.py:" in result.failure.details
    assert result.virtual_time == pytest.approx(0.1)


def test_time_limit_turns_a_hang_into_a_liveness_failure() -> None:
    async def main() -> None:
        while True:
            await trio.sleep(1)

    result = kelpie_dst.run(main, max_time=30)
    assert result.failure is not None
    assert result.failure.kind is FailureKind.LIVENESS
    assert "time limit of 30s" in result.failure.message
    assert result.virtual_time == 30
    assert "test_runner.py" in result.failure.details  # where main was waiting


def test_unkillable_deadlock_is_abandoned_cleanly() -> None:
    async def main() -> None:
        with trio.CancelScope(shield=True):
            await trio.Event().wait()

    result = kelpie_dst.run(main)
    assert result.failure is not None and result.failure.kind is FailureKind.LIVENESS

    # the thread is usable again afterwards
    async def again() -> int:
        await trio.sleep(1)
        return 5

    assert kelpie_dst.run(again).value == 5
    trio.run(trio.sleep, 0)  # and plain trio too


def test_cannot_run_inside_trio() -> None:
    async def outer() -> None:
        with pytest.raises(kelpie_dst.DstError, match=r"inside trio\.run"):
            kelpie_dst.run(trio.sleep, seed=1)  # type: ignore[arg-type]

    trio.run(outer)


def test_bad_options_are_usage_errors() -> None:
    async def main() -> None: ...

    with pytest.raises(kelpie_dst.UsageError, match="unknown strategy"):
        kelpie_dst.run(main, strategy="fifo")
    with pytest.raises(kelpie_dst.UsageError, match="guard policy"):
        kelpie_dst.run(main, guards="loose")
    with pytest.raises(kelpie_dst.UsageError, match="max_time"):
        kelpie_dst.run(main, max_time=-1)
    with pytest.raises(kelpie_dst.UsageError, match="unknown fault type"):
        kelpie_dst.run(main, faults=["disk.melt=0.1"])


def test_global_state_is_restored_after_a_run() -> None:
    import gc
    import random

    state = random.getstate()
    r_before = trio._core._run._r

    async def main() -> float:
        return random.random()

    first = kelpie_dst.run(main, seed=9).value
    assert random.getstate() == state
    assert trio._core._run._r is r_before
    assert gc.isenabled()
    # the global random module is seeded from the run's seed
    assert kelpie_dst.run(main, seed=9).value == first
    assert kelpie_dst.run(main, seed=10).value != first


def test_infinite_time_limit_by_default() -> None:
    async def main(sim: kelpie_dst.Simulation) -> float:
        return sim.config.max_time

    assert kelpie_dst.run(main).value == math.inf
