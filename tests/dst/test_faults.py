"""The fault registry, fault plans, swarm profiles and the injector."""

import math
from collections.abc import Iterator

import pytest
import trio

import kelpie_dst
from kelpie_dst import Fault, FaultPlan, FaultSpec, UsageError, _faults
from kelpie_dst._faults import fault_types, register_fault

TEST_FAULT = FaultSpec("testdomain.hiccup", "a fault used by these tests", params={"size": 3.0})


@pytest.fixture(autouse=True)
def _test_fault_registered() -> Iterator[None]:
    """Register the test-only fault type for this module's tests, and remove it afterwards so
    the registry other tests see (documented domains, allowed-domain lists) stays real."""
    register_fault(TEST_FAULT)
    yield
    _faults._REGISTRY.pop(TEST_FAULT.name, None)


def test_registry_lists_process_faults_and_rejects_bad_names() -> None:
    types = fault_types()
    assert {"process.crash", "process.pause", "testdomain.hiccup"} <= set(types)
    assert list(types) == sorted(types)
    with pytest.raises(ValueError, match=r"domain\.name"):
        register_fault(FaultSpec("nodomain", "bad"))
    with pytest.raises(ValueError, match="already registered"):
        register_fault(FaultSpec("testdomain.hiccup", "different text"))
    assert register_fault(TEST_FAULT) is TEST_FAULT  # idempotent


def test_fault_validation_gives_one_line_errors() -> None:
    with pytest.raises(
        UsageError, match=r"unknown fault type 'disk\.melt' \(known: .*process\.crash"
    ):
        Fault("disk.melt", 0.1)
    with pytest.raises(UsageError, match=r"within \[0, 1\]"):
        Fault("testdomain.hiccup", 1.5)
    with pytest.raises(UsageError, match="no parameter 'colour'"):
        Fault("testdomain.hiccup", 0.1, params=(("colour", 1.0),))
    with pytest.raises(UsageError, match="is empty"):
        Fault("testdomain.hiccup", 0.1, start=5, end=5)
    with pytest.raises(UsageError, match="TYPE=PROBABILITY"):
        Fault.parse("testdomain.hiccup")
    with pytest.raises(UsageError, match="not a number"):
        Fault.parse("testdomain.hiccup=lots")
    assert Fault.parse("testdomain.hiccup=0.25") == Fault("testdomain.hiccup", 0.25)
    assert Fault("testdomain.hiccup", 0.1, params=(("size", 9.0),)).param("size") == 9.0
    assert Fault("testdomain.hiccup", 0.1).param("size") == 3.0


def test_injector_respects_probability_window_and_nodes() -> None:
    async def main(sim: kelpie_dst.Simulation) -> dict[str, int]:
        counts = {"early": 0, "late": 0, "a": 0, "b": 0}
        for _ in range(1000):
            if sim.faults.fires("testdomain.hiccup", node="a"):
                counts["a"] += 1
            if sim.faults.fires("testdomain.hiccup", node="b"):
                counts["b"] += 1
        counts["early"] = counts["a"]
        await trio.sleep(20)
        for _ in range(100):
            if sim.faults.fires("testdomain.hiccup", node="a"):
                counts["late"] += 1
        return counts

    fault = Fault("testdomain.hiccup", 0.3, start=0, end=10, nodes=("a",))
    result = kelpie_dst.run(main, seed=1, faults=[fault])
    counts = result.value
    assert isinstance(counts, dict)
    assert 230 < counts["a"] < 370  # ~30% of 1000
    assert counts["b"] == 0  # node filter
    assert counts["late"] == 0  # outside the window
    assert result.faults_fired == {"testdomain.hiccup": counts["a"]}


def test_fault_decisions_are_deterministic_and_traced() -> None:
    async def main(sim: kelpie_dst.Simulation) -> list[bool]:
        return [sim.faults.fires("testdomain.hiccup") is not None for _ in range(50)]

    a = kelpie_dst.run(main, seed=3, faults=["testdomain.hiccup=0.5"])
    b = kelpie_dst.run(main, seed=3, faults=["testdomain.hiccup=0.5"])
    c = kelpie_dst.run(main, seed=4, faults=["testdomain.hiccup=0.5"])
    assert a.value == b.value and a.trace_hash == b.trace_hash
    assert a.value != c.value
    assert a.events > sum(a.value)  # type: ignore[arg-type]


def test_swarm_profile_comes_from_the_seed() -> None:
    plan = FaultPlan(swarm=True)
    profiles = {seed: plan.resolve(seed) for seed in range(30)}
    assert profiles[5] == FaultPlan(swarm=True).resolve(5)
    assert len({p for p in profiles.values()}) > 10  # seeds choose different profiles
    for profile in profiles.values():
        for fault in profile:
            low, high = fault.spec.swarm_range
            assert low <= fault.probability <= high
    # explicit faults win over the swarm's choice
    explicit = Fault("process.crash", 0.9)
    for seed in range(30):
        chosen = FaultPlan((explicit,), swarm=True).resolve(seed)
        assert [f for f in chosen if f.type == "process.crash"] == [explicit]


def test_heal_switches_faults_off() -> None:
    async def main(sim: kelpie_dst.Simulation) -> int:
        sim.heal()
        return sum(sim.faults.fires("testdomain.hiccup") is not None for _ in range(100))

    assert kelpie_dst.run(main, faults=["testdomain.hiccup=1"]).value == 0


def test_describe() -> None:
    fault = Fault("testdomain.hiccup", 0.2, start=1, end=5, nodes=("a", "b"), params=(("size", 2),))
    assert fault.describe() == "testdomain.hiccup=0.2 window=[1s, 5s) nodes=a,b size=2"
    assert Fault("testdomain.hiccup", 0.2).end == math.inf
