"""A simulation never hangs: a call blocked outside the model trips the real-time watchdog,
which names the thread or task and its line, and the run fails as a liveness violation (2)."""

from __future__ import annotations

import sys
import textwrap

import pytest

import kelpie_dst
from kelpie_dst import FailureKind
from tests.cli.helpers import ROOT, assert_usage_error, cli, subprocess_cli
from tests.threads import programs

ENTRY = "tests.threads.programs"


def test_a_thread_stuck_in_a_real_read_fails_the_run_with_exit_2_naming_its_line() -> None:
    out = subprocess_cli(
        "run", "--entry", f"{ENTRY}:stuck_thread_read", "--seed", "1", "--watchdog", "1s"
    )
    assert out.code == 2, out
    line = programs.line_of("os.read(r, 1)")
    assert "FAILED: liveness violation" in out.out
    assert (
        f"watchdog: thread 'reader' made no progress for 1s of real time: it is blocked "
        f"outside the simulation at {programs.__file__}:{line} in read: os.read(r, 1)"
    ) in out.out
    assert out.out.strip().splitlines()[-1] == (
        f"replay: kelpie-dst run --entry {ENTRY}:stuck_thread_read --seed 1 --watchdog 1s"
    )
    assert "Traceback" not in out.out + out.err


def test_the_trio_loop_stuck_in_a_real_read_is_interrupted() -> None:
    result = kelpie_dst.run(programs.stuck_loop_read, seed=1, watchdog=0.5)
    assert result.failure is not None and result.failure.kind is FailureKind.LIVENESS
    line = programs.line_of("os.read(r, 1)", after="async def stuck_loop_read")
    assert f"programs.py:{line} in stuck_loop_read: os.read(r, 1)" in result.failure.message
    assert result.failure.message.startswith("watchdog: task ")
    assert result.virtual_time == 1.0
    again = kelpie_dst.run(programs.stuck_loop_read, seed=1, watchdog=0.5)
    assert again.trace_hash == result.trace_hash  # the report is part of the trace


def test_a_lock_created_before_the_run_is_named() -> None:
    result = kelpie_dst.run(programs.real_lock_held, seed=1, watchdog=0.5)
    assert result.failure is not None and result.failure.kind is FailureKind.LIVENESS
    line = programs.line_of("with LOCK:")
    assert f"programs.py:{line} in work: with LOCK:" in result.failure.message
    assert "created before the run" in result.failure.details


def test_a_stuck_loop_off_the_main_thread_ends_the_process_with_exit_2() -> None:
    """No signal can reach a non-main thread's blocking call: after a second threshold the
    watchdog prints its report and ends the process, rather than let it hang."""
    script = textwrap.dedent(
        f"""
        import sys, threading
        sys.path.insert(0, {str(ROOT)!r})
        import kelpie_dst
        from tests.threads import programs
        thread = threading.Thread(
            target=kelpie_dst.run, args=(programs.stuck_loop_read,), kwargs={{"watchdog": 0.5}}
        )
        thread.start()
        thread.join()
        print("not reached")
        """
    )
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2, proc
    assert "not reached" not in proc.stdout
    assert "the watchdog could not interrupt the blocked call" in proc.stderr
    assert "in stuck_loop_read: os.read(r, 1)" in proc.stderr


def test_check_determinism_does_not_hang_on_a_stuck_thread(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = cli(
        capsys,
        "check-determinism",
        "--entry",
        f"{ENTRY}:stuck_thread_read",
        "--seed",
        "1",
        "--runs",
        "3",
        "--watchdog",
        "500ms",
    )
    assert out.code == 0, out
    assert out.out.startswith("deterministic: seed=1")
    assert "every run failed the same way: watchdog: thread 'reader'" in out.out


def test_the_threshold_is_validated_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    line = assert_usage_error(cli(capsys, "run", "--entry", f"{ENTRY}:timers", "--watchdog", "0s"))
    assert "--watchdog" in line
    scenario = ROOT / "tests" / "quality" / "scenarios" / "lost_update.toml"
    line = assert_usage_error(
        cli(capsys, "run", str(scenario), "--seed", "1", "--set", "simulation.watchdog=-1")
    )
    assert "simulation.watchdog" in line and "positive number of seconds" in line


def test_the_scenario_field_sets_the_threshold() -> None:
    from kelpie_dst.scenario import load_scenario

    path = ROOT / "tests" / "quality" / "scenarios" / "lost_update.toml"
    scenario = load_scenario(str(path), ["simulation.watchdog=2.5", "simulation.preemption=false"])
    assert scenario.simulation.watchdog == 2.5
    assert scenario.simulation.preemption is False
