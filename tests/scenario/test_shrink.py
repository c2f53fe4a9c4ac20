"""Shrinking keeps the failure class, reduces the plan, and its outputs reproduce the run."""

from __future__ import annotations

import tomllib
from pathlib import Path

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.scenario._shrink import shrink

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
