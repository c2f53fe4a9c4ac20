"""Ctrl-C during a run or a sweep: exit 130, one line on stderr, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .helpers import ROOT

LONG_RUN = [
    "run",
    "kv_linearizability",
    "--seed",
    "1",
    "--set",
    "workload.params.ops=100000",  # the most the workload allows: far past the Ctrl-C
    "--set",
    "liveness.within=1000h",
]
LONG_SWEEP = ["sweep", "kv_linearizability", "--seeds", "100000", "--jobs", "2"]


@pytest.mark.parametrize("args", [LONG_RUN, LONG_SWEEP], ids=["run", "sweep"])
def test_ctrl_c_exits_130_with_one_line(args: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kelpie_dst", *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONHASHSEED="0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the signal goes to the whole group, like a terminal's
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the first line is printed once the work has started
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines() == ["kelpie-dst: interrupted"], err
    assert "Traceback" not in out + err
