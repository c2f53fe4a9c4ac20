"""Shrinking keeps the failure class, reduces the plan, and its outputs reproduce the run."""

from __future__ import annotations

import tomllib
from pathlib import Path

import attrs
import pytest

import kelpie_dst
from kelpie_dst import FailureKind
from kelpie_dst._cli import main
from kelpie_dst._entry import load_entry
from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.scenario._shrink import _shrink, shrink, shrink_entry
from kelpie_dst.scenario._shrink_targets import Plan, PlanFault, ScenarioTarget

ROOT = Path(__file__).resolve().parents[2]
LOST_UPDATE = str(ROOT / "tests/quality/scenarios/lost_update.toml")


def test_shrink_reduces_and_its_outputs_replay(tmp_path: Path) -> None:
    steps: list[str] = []
    result = shrink(LOST_UPDATE, 3, on_step=steps.append)
    original, minimal = result.original, result.minimal
    assert original.result.failure is not None and minimal.result.failure is not None
    assert minimal.result.failure.kind is original.result.failure.kind
    assert len(minimal.scenario.faults_for(3)) < len(original.scenario.faults_for(3))
    assert minimal.scenario.duration < original.scenario.duration
    assert steps and result.runs <= 300
    # the overrides replay the minimal run exactly ...
    again = run_scenario(load_scenario(LOST_UPDATE, result.overrides), 3)
    assert again.result.trace_hash == minimal.result.trace_hash
    # ... and so does the standalone scenario file
    path = tmp_path / "min.toml"
    path.write_text(result.toml())
    data = tomllib.loads(path.read_text())
    assert data["name"] == "canary_lost_update-seed3-min"
    in_file = [name for group in data.get("faults", {}).values() for name in group]
    assert len(in_file) == len(minimal.scenario.faults_for(3))  # dropped faults are gone
    standalone = run_scenario(load_scenario(path), 3)
    assert standalone.result.trace_hash == minimal.result.trace_hash
    # shrinking is deterministic
    assert shrink(LOST_UPDATE, 3).overrides == result.overrides


def test_shrink_honours_the_run_budget() -> None:
    result = shrink(LOST_UPDATE, 3, max_runs=3)
    assert result.runs == 3
    assert result.minimal.result.failure is not None


# -- nodes, the duration cut, plain programs, the fault report ----------------------------------

SPREAD = str(ROOT / "tests/quality/scenarios/spread_counter.toml")
ENTRY_OPTIONS = {"guards": "redirect", "strategy": "random", "faults": [], "swarm": False}


@attrs.frozen
class _Failure:
    kind: FailureKind
    message: str
    virtual_time: float


@attrs.frozen
class _Result:
    failure: _Failure | None


@attrs.frozen
class _Outcome:
    result: _Result


class _FakeTarget:
    """Fails (an invariant, at t=5) while at least two nodes are left and fault ``keep`` is
    on; the shrinker must find exactly that."""

    windows = True
    deadline = False
    duration_name = "duration"

    def __init__(self) -> None:
        self.plans: list[Plan] = []

    def first(self, seed: int) -> _Outcome:
        return self.run(self.initial(None), seed)

    def initial(self, first: object) -> Plan:
        return Plan(
            faults=(
                PlanFault("a.keep", 0.5, targets=("n1", "n3")),
                PlanFault("b.extra", 0.5, targets=("n3", "n4")),
            ),
            duration=60.0,
            nodes=("n1", "n2", "n3", "n4"),
        )

    def fault_end(self, plan: Plan) -> float | None:
        return plan.duration

    def size_floor(self, name: str) -> int:
        raise KeyError(name)

    def key(self, plan: Plan) -> tuple[str, ...]:
        return (repr(plan),)

    def run(self, plan: Plan, seed: int, trace_file: str | None = None) -> _Outcome:
        self.plans.append(plan)
        keep = any(f.type == "a.keep" for f in plan.faults)
        fails = len(plan.nodes) >= 2 and keep and (plan.duration or 0) > 5
        failure = _Failure(FailureKind.INVARIANT, "boom", 5.0) if fails else None
        return _Outcome(_Result(failure))


def test_nodes_are_removed_and_fault_targets_follow() -> None:
    target = _FakeTarget()
    result = _shrink(target, target.first(0), 0, 300, None, None, False, 0.0)
    (plan_key,) = result.overrides  # the fake's key is the minimal plan's repr
    assert "nodes=('n1', 'n2')" in plan_key
    assert "PlanFault(type='a.keep'" in plan_key and "targets=('n1',)" in plan_key
    assert "b.extra" not in plan_key  # dropped: the failure does not need it
    # the duration was cut just after the failure (t=5), never below it
    assert "duration=5.001" in plan_key
    assert any(note.startswith("nodes: 4 -> 3") for note in result.notes)


def test_a_fault_loses_a_removed_node_or_goes_with_its_last_one() -> None:
    base = load_scenario(SPREAD)
    target = ScenarioTarget(base, ())
    plan = Plan(
        faults=(PlanFault("process.pause", 0.05, targets=("n3",)),),
        sizes=(("increments", 4),),
        duration=base.duration,
        nodes=("n1", "n2", "n3"),
    )
    key = target.key(plan)
    assert 'topology.nodes=["n1", "n2", "n3"]' in key
    assert 'faults.process.pause.targets=["n3"]' in key
    loaded = load_scenario(SPREAD, key)
    assert loaded.topology.nodes == ("n1", "n2", "n3")
    assert [e.targets for e in loaded.faults if e.type == "process.pause"] == [("n3",)]


def test_shrinking_a_scenario_removes_nodes_and_names_the_last_faults() -> None:
    """spread_counter seed 0 fails with four nodes; two are enough to lose an update."""
    result = shrink(SPREAD, 0, max_runs=80)
    before = result.original.scenario.topology.nodes
    after = result.minimal.scenario.topology.nodes
    assert len(after) < len(before) and set(after) <= set(before)
    again = run_scenario(load_scenario(SPREAD, result.overrides), 0)
    assert again.result.trace_hash == result.minimal.result.trace_hash
    failed_at = result.minimal.result.failure.virtual_time
    assert result.last_faults, "storage.latency fires before every lost update here"
    times = [m.time for m in result.last_faults]
    assert times == sorted(times) and times[-1] <= failed_at
    assert all(m.fault.startswith("storage.") for m in result.last_faults)


def test_a_plain_program_shrinks_its_faults_and_its_time_limit() -> None:
    options = {
        **ENTRY_OPTIONS,
        "faults": ["storage.latency=0.3"],
        "swarm": True,
        "max_time": 3600.0,
    }
    result = shrink_entry("tests.quality.shrink_workloads:overdraw", 1, options)
    minimal = result.minimal
    assert minimal.options["faults"] == [] and minimal.options["swarm"] is False
    assert minimal.options["max_time"] == pytest.approx(3.501)
    assert result.failed_at == (3.5, 3.5)  # the same run: cut just after its failure
    again = kelpie_dst.run(load_entry(minimal.entry), seed=1, max_time=minimal.options["max_time"])
    assert again.trace_hash == minimal.result.trace_hash


def test_a_time_limit_is_never_shrunk_below_the_failure() -> None:
    options = {**ENTRY_OPTIONS, "max_time": 20.0}
    result = shrink_entry("tests.quality.shrink_workloads:never_done", 0, options)
    assert result.kind is FailureKind.LIVENESS
    assert result.minimal.options["max_time"] == 20.0  # any limit would do: keep the user's


def test_shrink_entry_from_the_command_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONHASHSEED", "0")  # as the kelpie-dst command pins it
    main(["shrink", "--entry", "tests.quality.shrink_workloads:overdraw", "--seed", "1"])
    out = capsys.readouterr().out
    assert "max time no limit -> 3.501s" in out
    command = "kelpie-dst run --entry tests.quality.shrink_workloads:overdraw --seed 1"
    assert f"run: {command} --max-time 3.501s" in out
    assert "no fault fired before the failure" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["shrink", "x.toml", "--entry", "a:b", "--seed", "1"],
        ["shrink", "--seed", "1"],
        ["shrink", SPREAD, "--seed", "0", "--fault", "storage.latency=0.1"],
        ["shrink", "--entry", "a:b", "--seed", "1", "--set", "duration=1s"],
    ],
)
def test_shrink_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith("kelpie-dst: error:") and "\n" not in err
