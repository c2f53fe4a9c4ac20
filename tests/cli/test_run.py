"""`kelpie-dst run SCENARIO`: output contract, profile before the run, replay lines, markup."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kelpie_dst.scenario import ReplayToken

from .helpers import QUALITY, cli, subprocess_cli

SUMMARY = re.compile(r"^seed=(\d+) trace_hash=([0-9a-f]{32}) virtual_time=[\d.]+ events=\d+$")


def test_scenario_run_prints_the_plan_and_profile_first(capsys: pytest.CaptureFixture[str]) -> None:
    out = cli(capsys, "run", "kv_linearizability", "--seed", "5", "--set", "workload.params.ops=4")
    assert out.code == 0, out
    lines = out.out.splitlines()
    assert lines[0].startswith("kelpie-dst: running scenario kv_linearizability (")
    assert lines[0].endswith(" with seed 5 (strategy random)")
    assert lines[1] == "overrides: workload.params.ops=4"
    assert lines[2].startswith("workload kelpie_dst.workloads.kv:kv_linearizability ")
    assert "ops=4" in lines[2] and "liveness: heal at 30s, then finish within 30s" in lines[2]
    assert lines[3].startswith("faults: network.partition=0.2 ") and "swarm chose: " in lines[3]
    assert any(line.startswith("metrics: ") for line in lines)
    assert SUMMARY.match(lines[-1]) and lines[-1].startswith("seed=5 ")


def test_cli_flags_become_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    out = cli(
        capsys,
        "run",
        "kv_linearizability",
        "--seed",
        "1",
        "--no-swarm",
        "--strategy",
        "pct",
        "--fault",
        "storage.latency=0.9",
        "--set",
        "workload.params.ops=2",
    )
    assert out.code == 0, out
    assert "strategy pct" in out.out and "swarm chose" not in out.out
    assert "storage.latency=0.9" in out.out


def test_failure_ends_with_a_replay_token(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = str(QUALITY / "lost_update.toml")
    out = cli(capsys, "run", scenario, "--seed", "3")
    assert out.code == 1
    lines = out.out.splitlines()
    assert "FAILED: invariant violation at t=" in out.out
    summary = SUMMARY.match(lines[-2])
    assert summary is not None
    assert lines[-1].startswith("replay: kelpie-dst replay kd1.")
    token = ReplayToken.decode(lines[-1].split()[-1])
    assert token == ReplayToken(scenario, 3, (), summary.group(2), "0")


def test_messages_are_printed_verbatim_not_as_markup(capsys: pytest.CaptureFixture[str]) -> None:
    out = cli(capsys, "run", "--entry", "tests.cli.programs:brackets", "--seed", "1")
    assert out.code == 3
    assert "KeyError: '[b]'" in out.out
    assert 'table["[b]"] += table["[a]"]' in out.out


def test_entry_runs_print_the_swarm_profile_before_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = cli(
        capsys, "run", "--entry", "kelpie_dst.examples.interleave:main", "--seed", "4", "--swarm"
    )
    lines = out.out.splitlines()
    assert lines[1].startswith("faults: ") and "=" in lines[1]
    assert lines.index(lines[1]) < next(i for i, ln in enumerate(lines) if "virtual time" in ln)


def test_replay_lines_write_durations_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    for given, written in (("1.5h", "90m"), ("90.25s", "90.25s"), ("1h30m", "90m")):
        out = cli(
            capsys,
            "run",
            "--entry",
            "kelpie_dst.examples.deadlock:main",
            "--seed",
            "1",
            "--max-time",
            given,
        )
        assert out.code == 2
        assert out.out.splitlines()[-1].endswith(f"--seed 1 --max-time {written}")


def test_random_hash_seed_gives_no_replay_line_that_would_not_replay() -> None:
    env = {"PYTHONHASHSEED": None, "KELPIE_DST_NO_REEXEC": "1"}
    entry = subprocess_cli(
        "run", "--entry", "kelpie_dst.examples.deadlock:main", "--seed", "1", env=env
    )  # type: ignore[arg-type]
    assert entry.code == 2
    assert entry.out.splitlines()[-1].startswith("replay: unavailable: ")
    scenario = subprocess_cli("run", str(QUALITY / "lost_update.toml"), "--seed", "3", env=env)  # type: ignore[arg-type]
    assert scenario.code == 1
    assert scenario.out.splitlines()[-1].startswith("replay: unavailable: ")


def test_a_pinned_hash_seed_is_named_and_replayed_under_it() -> None:
    first = subprocess_cli(
        "run", str(QUALITY / "lost_update.toml"), "--seed", "3", env={"PYTHONHASHSEED": "5"}
    )
    token = ReplayToken.decode(first.out.splitlines()[-1].split()[-1])
    assert token.hashseed == "5"
    assert token.run_command().startswith("PYTHONHASHSEED=5 kelpie-dst run ")
    # replayed from a process with another hash seed: it re-executes under 5 and matches
    again = subprocess_cli("replay", token.encode(), env={"PYTHONHASHSEED": "0"})
    assert again.code == 1, again
    assert f"reproduced: same trace hash {token.trace_hash}" in again.out


def test_profile_writes_a_cprofile_of_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import pstats

    for args in (["--entry", "kelpie_dst.examples.bank:main"], ["bank"]):
        path = tmp_path / "run.prof"
        out = cli(capsys, "run", *args, "--seed", "1", "--profile", str(path))
        assert out.code == 0 and f"profile written to {path}" in out.err
        stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
        assert "unrolled_run" in {name for _, _, name in stats}  # trio's loop: the run itself
        path.unlink()


def test_speed_ratios_below_one_are_not_printed_as_zero() -> None:
    from kelpie_dst._cli_common import speed_ratio

    assert [speed_ratio(r) for r in (0.0042, 0.42, 3.456, 12.4, 2400.0, 0.0)] == [
        "0.0042x",
        "0.42x",
        "3.5x",
        "12x",
        "2,400x",
        "0x",
    ]
