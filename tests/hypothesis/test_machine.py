"""SimStateMachine: async rules as simulation steps, one simulation per example, seeds drawn."""

from __future__ import annotations

import gc
import random
import unittest
from typing import ClassVar

import hypothesis.strategies as st
import pytest
import trio
from hypothesis import Phase, given, settings
from hypothesis.stateful import (
    Bundle,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import kelpie_dst
from kelpie_dst.hypothesis import (
    PROFILE_ENV,
    REPRODUCE_ENV,
    SimStateMachine,
    profile_settings,
    run_machine,
)

FAST = profile_settings(max_examples=15, stateful_step_count=8)


class Recorder(SimStateMachine):
    """Records where and when each kind of member ran."""

    log: ClassVar[list[tuple[str, object]]] = []

    async def setup(self) -> None:
        self.log.append(("setup", trio.current_time()))
        self.count = 0

    @initialize()
    async def start(self) -> None:
        self.log.append(("init-node", kelpie_dst.current_simulation().current_node().name))

    @precondition(lambda self: self.count < 100)
    @rule(seconds=st.sampled_from([0.0, 0.5]))
    async def tick(self, seconds: float) -> None:
        start = trio.current_time()
        await trio.sleep(seconds)
        self.count += 1
        self.log.append(("tick", (start, trio.current_time())))

    @rule()
    def host_rule(self) -> None:
        self.log.append(("host", trio.lowlevel.in_trio_task()))

    @invariant()
    async def count_matches(self) -> None:
        self.log.append(("invariant", trio.lowlevel.in_trio_task()))

    def teardown(self) -> None:
        self.log.append(("teardown", self.sim_seed))
        super().teardown()


def test_async_members_run_as_steps_and_time_is_frozen_between_them() -> None:
    Recorder.log = []
    run_machine(Recorder, settings=FAST)
    kinds = [kind for kind, _ in Recorder.log]
    assert kinds.count("setup") == kinds.count("teardown") >= 15
    assert ("init-node", "main") in Recorder.log  # steps run on the main node
    assert ("invariant", True) in Recorder.log  # async invariants run inside trio
    assert ("host", False) in Recorder.log  # plain def rules run on the host
    # Within one example, each tick starts exactly when the previous one ended.
    last_end = None
    for kind, value in Recorder.log:
        if kind == "setup":
            assert value == 0.0
            last_end = 0.0
        elif kind == "tick":
            start, end = value  # type: ignore[misc]
            assert start == last_end
            last_end = end
    assert kelpie_dst.current_simulation() is None


def test_seeds_are_drawn_per_example_and_each_explores_its_own_schedule() -> None:
    """Hypothesis alone seeds trio's scheduler with 0 in every example; here seeds differ."""
    orders: dict[int, str] = {}

    class Race(SimStateMachine):
        @rule()
        async def race(self) -> None:
            seen: list[str] = []

            async def append(name: str) -> None:
                await trio.lowlevel.checkpoint()
                seen.append(name)

            async with trio.open_nursery() as nursery:
                for name in "abcd":
                    nursery.start_soon(append, name)
            orders[self.sim_seed] = "".join(seen)

    run_machine(Race, settings=profile_settings(max_examples=40, stateful_step_count=1))
    assert len(orders) >= 20
    assert len(set(orders.values())) >= 6, orders


def test_plain_hypothesis_sees_one_schedule() -> None:
    """The contrast: @given around trio.run gives every example the same task order."""
    orders: set[str] = set()

    async def race() -> None:
        seen: list[str] = []

        async def append(name: str) -> None:
            await trio.lowlevel.checkpoint()
            seen.append(name)

        async with trio.open_nursery() as nursery:
            for name in "abcd":
                nursery.start_soon(append, name)
        orders.add("".join(seen))

    @settings(max_examples=20, database=None)
    @given(st.integers())
    def check(_: int) -> None:
        trio.run(race)

    check()
    assert len(orders) == 1


def test_teardown_closes_the_simulation_when_a_step_fails() -> None:
    class Failing(SimStateMachine):
        @rule(n=st.integers(0, 3))
        async def step(self, n: int) -> None:
            await trio.sleep(1)
            assert n < 2, "n too big"

    with pytest.raises(AssertionError, match="n too big") as info:
        run_machine(Failing, settings=FAST)
    assert kelpie_dst.current_simulation() is None
    notes = "\n".join(info.value.__notes__)
    assert "state.step(n=2)" in notes
    assert "kelpie_dst: simulation seed=0 " in notes  # shrunk: the seed does not matter
    assert "kelpie_dst: replay: KELPIE_HYPOTHESIS_REPRODUCE='" in notes


def test_a_deadlocked_step_fails_as_a_liveness_error() -> None:
    class Stuck(SimStateMachine):
        @rule()
        async def wait_forever(self) -> None:
            await trio.Event().wait()

    with pytest.raises(kelpie_dst.LivenessError, match="deadlock"):
        run_machine(Stuck, settings=FAST)
    assert kelpie_dst.current_simulation() is None


def test_a_simulation_left_open_by_an_example_does_not_block_the_next() -> None:
    class Plain(SimStateMachine):
        @rule()
        async def nothing(self) -> None:
            await trio.sleep(0)

    abandoned = Plain()
    abandoned.nothing()  # opens a simulation; teardown never called
    assert kelpie_dst.current_simulation() is abandoned.sim
    fresh = Plain()
    fresh.nothing()
    assert abandoned.handle.closed and not fresh.handle.closed
    fresh.teardown()
    assert kelpie_dst.current_simulation() is None


def test_outside_hypothesis_the_seed_comes_from_dst_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    class Plain(SimStateMachine):
        @rule()
        async def nothing(self) -> None:
            await trio.sleep(0)

    monkeypatch.setenv("DST_SEED", "42")
    machine = Plain()
    assert machine.sim_seed == 42 and machine.sim.seed == 42
    machine.teardown()
    monkeypatch.setenv("DST_SEED", "x")
    with pytest.raises(kelpie_dst.UsageError, match="DST_SEED must be an integer"):
        Plain()


def test_sim_options_are_passed_and_may_not_set_the_seed() -> None:
    class Pct(SimStateMachine):
        sim_options: ClassVar[dict[str, object]] = {"strategy": "pct", "max_time": 5.0}

        @rule()
        async def check(self) -> None:
            assert self.sim.config.strategy == "pct"
            assert self.sim.config.max_time == 5.0

    run_machine(Pct, settings=FAST)

    class Seeded(Pct):
        sim_options: ClassVar[dict[str, object]] = {"seed": 3}

    with pytest.raises(kelpie_dst.UsageError, match="must not set 'seed'"):
        run_machine(Seeded, settings=FAST)

    class Typo(Pct):
        sim_options: ClassVar[dict[str, object]] = {"stratgy": "pct"}

    with pytest.raises(kelpie_dst.UsageError, match="unknown option 'stratgy'"):
        run_machine(Typo, settings=FAST)


def test_run_machine_rejects_other_classes() -> None:
    with pytest.raises(kelpie_dst.UsageError, match="SimStateMachine subclass"):
        run_machine(int)  # type: ignore[arg-type]


def test_profiles_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    ci = profile_settings()
    assert (ci.max_examples, ci.derandomize, ci.database) == (50, True, None)
    monkeypatch.setenv(PROFILE_ENV, "extended")
    extended = profile_settings()
    assert extended.max_examples >= 200 and extended.stateful_step_count == 50
    assert not extended.derandomize and extended.database is not None
    for chosen in (ci, extended):
        assert chosen.deadline is None and Phase.explain not in chosen.phases
    assert profile_settings("ci", max_examples=3).max_examples == 3
    monkeypatch.setenv(PROFILE_ENV, "nightly")
    with pytest.raises(kelpie_dst.UsageError, match="KELPIE_HYPOTHESIS_PROFILE='nightly' is not"):
        profile_settings()


def test_testcase_runs_the_machine_with_class_settings() -> None:
    runs: list[int] = []

    @settings(profile_settings(max_examples=7))
    class Counted(SimStateMachine):
        @rule(n=st.integers())
        async def step(self, n: int) -> None:
            await trio.sleep(0)

        def teardown(self) -> None:
            runs.append(self.sim_seed)
            super().teardown()

    result = unittest.TestResult()
    Counted.TestCase("runTest").run(result)
    assert result.wasSuccessful(), result.errors + result.failures
    assert len(runs) == 7


def test_reproduce_variable_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    class Plain(SimStateMachine):
        @rule()
        async def nothing(self) -> None:
            await trio.sleep(0)

    monkeypatch.setenv(REPRODUCE_ENV, "Other:6.0:AXic")  # names another machine: ignored
    run_machine(Plain, settings=FAST)
    monkeypatch.setenv(REPRODUCE_ENV, "Plain")
    with pytest.raises(kelpie_dst.UsageError, match="must look like 'Machine:VERSION:BLOB'"):
        run_machine(Plain, settings=FAST)


def test_global_state_is_restored_after_the_run() -> None:
    run_module = trio._core._run
    before = (run_module._r, run_module._ALLOW_DETERMINISTIC_SCHEDULING, gc.isenabled())
    state = random.getstate()
    run_machine(Recorder, settings=FAST)
    after = (run_module._r, run_module._ALLOW_DETERMINISTIC_SCHEDULING, gc.isenabled())
    assert after == before
    assert random.getstate() == state


def test_async_rules_fill_and_consume_bundles() -> None:
    consumed: list[int] = []

    class Bundles(SimStateMachine):
        tickets = Bundle("tickets")

        @rule(target=tickets, n=st.integers(0, 9))
        async def issue(self, n: int) -> int:
            await trio.sleep(1)
            return n * 10

        @rule(ticket=consumes(tickets))
        async def redeem(self, ticket: int) -> None:
            await trio.sleep(0)
            consumed.append(ticket)

    run_machine(Bundles, settings=FAST)
    assert consumed and all(t % 10 == 0 for t in consumed)


def test_async_preconditions_run_inside_the_simulation() -> None:
    started: list[float] = []

    async def early(machine: SimStateMachine) -> bool:
        await trio.lowlevel.checkpoint()
        return trio.current_time() < 3

    class Gated(SimStateMachine):
        @precondition(early)
        @rule()
        async def tick(self) -> None:
            started.append(trio.current_time())
            await trio.sleep(1)

        @rule()
        async def wait(self) -> None:
            await trio.sleep(1)

    run_machine(Gated, settings=FAST)
    assert started and max(started) < 3


def test_hypothesis_runner_alone_uses_the_profile_too() -> None:
    runs: list[int] = []

    class Direct(SimStateMachine):
        @rule(n=st.integers())
        async def step(self, n: int) -> None:
            await trio.sleep(0)

        def teardown(self) -> None:
            runs.append(self.sim_seed)
            super().teardown()

    assert Direct.TestCase.settings.max_examples == profile_settings().max_examples
    run_state_machine_as_test(Direct)
    assert len(runs) >= profile_settings().max_examples
