"""The kelpie-dst command, run as a real subprocess: output contract and exit codes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SUMMARY = re.compile(r"^seed=(\d+) trace_hash=([0-9a-f]{32}) virtual_time=([\d.]+) events=(\d+)$")


def kelpie_dst(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTHONHASHSEED", None)  # the CLI pins it itself by re-executing
    return subprocess.run(
        [sys.executable, "-m", "kelpie_dst", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def test_success_ends_with_the_summary_line() -> None:
    proc = kelpie_dst("run", "--entry", "kelpie_dst.examples.bank:main", "--seed", "5")
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    match = SUMMARY.match(last)
    assert match and match.group(1) == "5"
    again = kelpie_dst("run", "--entry", "kelpie_dst.examples.bank:main", "--seed", "5")
    assert again.stdout.strip().splitlines()[-1] == last  # fresh process, same hash


def test_without_seed_a_seed_is_chosen_and_printed_first() -> None:
    proc = kelpie_dst("run", "--entry", "kelpie_dst.examples.interleave:main")
    assert proc.returncode == 0
    first = proc.stdout.splitlines()[0]
    seed = re.search(r"with seed (\d+)", first)
    assert seed is not None
    assert proc.stdout.strip().splitlines()[-1].startswith(f"seed={seed.group(1)} ")


@pytest.mark.parametrize(
    ("entry", "extra", "code", "label"),
    [
        ("kelpie_dst.examples.race:main", ["--strategy", "pct", "--seed", "19"], 1, "invariant"),
        ("kelpie_dst.examples.deadlock:main", ["--seed", "1"], 2, "liveness"),
        ("kelpie_dst.examples.leaky:uses_time", ["--strict", "--seed", "1"], 4, "nondeterminism"),
    ],
)
def test_failures_print_class_and_replay_line(
    entry: str, extra: list[str], code: int, label: str
) -> None:
    proc = kelpie_dst("run", "--entry", entry, *extra)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert f"FAILED: {label}" in proc.stdout
    replay = proc.stdout.strip().splitlines()[-1]
    assert replay.startswith("replay: kelpie-dst run --entry " + entry)
    # the replay line reproduces the failure exactly
    replay_args = replay.split()[3:]
    again = kelpie_dst("run", *replay_args)
    assert again.returncode == code
    summary = [line for line in proc.stdout.splitlines() if SUMMARY.match(line)]
    assert summary and summary[0] in again.stdout


def test_crash_exit_code_and_user_traceback(tmp_path: Path) -> None:
    (tmp_path / "crashy.py").write_text(
        "import trio\nasync def main():\n    await trio.sleep(1)\n    {}['missing']\n"
    )
    proc = kelpie_dst("run", "--entry", "crashy:main", "--seed", "3", cwd=tmp_path)
    assert proc.returncode == 3
    assert "KeyError: 'missing'" in proc.stdout
    assert 'crashy.py", line 4, in main' in proc.stdout


def test_deadlock_report_lists_tasks() -> None:
    proc = kelpie_dst("run", "--entry", "kelpie_dst.examples.deadlock:main", "--seed", "0")
    assert proc.returncode == 2
    assert "deadlock at t=0.100000s" in proc.stdout
    assert proc.stdout.count("deadlock.py:") == 2


def test_max_time_and_trace_file(tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    proc = kelpie_dst(
        "run",
        "--entry",
        "kelpie_dst.examples.bank:main",
        "--seed",
        "1",
        "--max-time",
        "2s",
        "--trace",
        str(trace),
    )
    assert proc.returncode == 2
    assert "time limit of 2s" in proc.stdout
    assert "--max-time 2s" in proc.stdout
    assert trace.stat().st_size > 100


def test_check_determinism_exit_codes() -> None:
    ok = kelpie_dst(
        "check-determinism", "--entry", "kelpie_dst.examples.interleave:main", "--seed", "4"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("deterministic: seed=4 trace_hash=")
    assert "fresh process 2:" in ok.stdout  # two fresh processes by default (issue #14)
    bad = kelpie_dst(
        "check-determinism", "--entry", "kelpie_dst.examples.setorder:main", "--seed", "4"
    )
    assert bad.returncode == 4
    assert "first divergent event at index" in bad.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["run"],
        ["run", "--entry", "x"],
        ["run", "--entry", "no.such.module:main"],
        ["run", "--entry", "kelpie_dst.examples.bank:nope"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--seed", "abc"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--strategy", "fifo"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--fault", "disk.melt=0.1"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--fault", "process.crash"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--fault", "process.crash=2"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--max-time", "soon"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--max-time", "0s"],
        ["run", "--entry", "kelpie_dst.examples.bank:main", "--bogus"],
        ["check-determinism", "--entry", "kelpie_dst.examples.bank:main"],
        [
            "check-determinism",
            "--entry",
            "kelpie_dst.examples.bank:main",
            "--seed",
            "1",
            "--runs",
            "1",
        ],
        ["frobnicate"],
    ],
)
def test_usage_errors_are_one_line_and_exit_64(args: list[str]) -> None:
    proc = kelpie_dst(*args)
    assert proc.returncode == 64, (args, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kelpie-dst: error: "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_faults_lists_registered_types() -> None:
    proc = kelpie_dst("faults")
    assert proc.returncode == 0
    assert "process.crash" in proc.stdout and "restart_after=2" in proc.stdout
