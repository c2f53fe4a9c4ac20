"""A program that keeps trio busy without virtual time moving fails as a livelock, with a
replayable seed, instead of hanging the run (``livelock_steps``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import kelpie_dst
from kelpie_dst import FailureKind, UsageError
from kelpie_dst._clock import DEFAULT_LIVELOCK_STEPS
from kelpie_dst.scenario import ScenarioError, load_scenario

LIMIT = 20_000


async def _spinner() -> None:
    """Retries with no delay: yields at every turn, never waits, so time never moves."""
    while True:
        await trio.sleep(0)


async def spins() -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_spinner, name="retry-without-backoff")
        await trio.sleep(1)  # never fires: time only moves when every task waits
        nursery.cancel_scope.cancel()


def busy(batches: int, steps: int) -> object:
    """``batches`` bursts of ``steps`` sleep(0)s, with one virtual second between bursts."""

    async def main() -> None:
        for _ in range(batches):
            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(_steps, steps // 10)
            await trio.sleep(1)

    return main


async def _steps(n: int) -> None:
    for _ in range(n):
        await trio.sleep(0)


def test_a_task_that_yields_forever_fails_the_run_as_a_livelock_naming_it() -> None:
    result = kelpie_dst.run(spins, seed=7, livelock_steps=LIMIT)
    assert result.failure is not None
    assert result.failure.kind is FailureKind.LIVENESS
    message = result.failure.message
    assert message.startswith("livelock at t=0.000000s: tasks ran 20,001 steps"), message
    assert "simulation.livelock_steps = 20,000" in message
    assert "retry-without-backoff" in result.failure.details


def test_a_livelock_replays_bit_for_bit() -> None:
    first = kelpie_dst.run(spins, seed=7, livelock_steps=LIMIT)
    again = kelpie_dst.run(spins, seed=7, livelock_steps=LIMIT)
    assert first.trace_hash == again.trace_hash
    assert first.steps == again.steps


def test_the_budget_is_per_instant_so_busy_programs_whose_time_moves_pass() -> None:
    # 15,000 steps at each of three instants: under the limit at every one of them
    result = kelpie_dst.run(busy(3, 15_000), seed=1, livelock_steps=LIMIT)
    assert result.failure is None, result.failure
    assert result.steps > 3 * 15_000 > LIMIT


def test_a_burst_over_the_budget_fails_and_zero_turns_the_check_off() -> None:
    program = busy(1, 30_000)
    failed = kelpie_dst.run(program, seed=1, livelock_steps=LIMIT)
    assert failed.failure is not None and failed.failure.kind is FailureKind.LIVENESS
    assert kelpie_dst.run(program, seed=1, livelock_steps=0).failure is None
    assert kelpie_dst.run(program, seed=1).failure is None  # the default allows 500,000
    assert DEFAULT_LIVELOCK_STEPS == 500_000


@pytest.mark.parametrize("bad", [-1, True, 2.5, "many"])
def test_a_bad_budget_is_a_one_line_usage_error(bad: object) -> None:
    with pytest.raises(UsageError, match="livelock_steps must be a whole number"):
        kelpie_dst.run(spins, livelock_steps=bad)  # type: ignore[arg-type]


def test_scenarios_set_the_budget_and_reject_bad_values(tmp_path: Path) -> None:
    assert load_scenario("kv_linearizability").simulation.livelock_steps == 500_000
    moved = load_scenario("kv_linearizability", ["simulation.livelock_steps=0"])
    assert moved.simulation.livelock_steps == 0
    for bad in ("-5", '"lots"'):
        with pytest.raises(ScenarioError) as info:
            load_scenario("kv_linearizability", [f"simulation.livelock_steps={bad}"])
        assert info.value.field == "simulation.livelock_steps"
