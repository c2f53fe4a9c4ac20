"""`kelpie-dst sweep --entry`: plain programs swept like scenarios, with `run --entry` replay
lines; and failures that only happen after other seeds in the same process are reported as
such (exit 4, both hashes, the leaking state named), never with a replay line that would not
reproduce them (issue #14, items 6 and 7). Run as subprocesses: PYTHONHASHSEED is pinned."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .helpers import subprocess_cli

LEAKY = "tests.cli.programs:leaky"
FLAKY = "tests.cli.programs:flaky_by_seed"


def _sweep(tmp_path: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    report = tmp_path / "report.json"
    out = subprocess_cli("sweep", *args, "--json", str(report), timeout=300)
    return out.code, out.out + out.err, json.loads(report.read_text())


def test_an_entry_sweep_prints_run_replay_lines_that_reproduce(tmp_path: Path) -> None:
    code, out, data = _sweep(tmp_path, "--entry", FLAKY, "--seeds", "4", "--jobs", "2")
    assert code == 1, out
    failed = [r for r in data["results"] if not r["ok"]]
    assert [r["seed"] for r in failed] == [1, 3]
    for r in failed:
        assert r["replay"] == f"kelpie-dst run --entry {FLAKY} --seed {r['seed']}"
        assert f"replay: {r['replay']}" in out and r["carried_over"] is None
        again = subprocess_cli(*shlex.split(r["replay"])[1:])
        assert again.code == 1 and f"trace_hash={r['trace_hash']}" in again.out


def test_a_failure_that_depends_on_earlier_seeds_is_reported_as_such(tmp_path: Path) -> None:
    code, out, data = _sweep(tmp_path, "--entry", LEAKY, "--seeds", "3", "--jobs", "1")
    assert code == 4, out
    first, second, third = data["results"]
    assert first["ok"] and not second["ok"] and not third["ok"]
    for r in (second, third):
        assert r["failure_class"] == "nondeterminism" and r["replay"] is None
        carried = r["carried_over"]
        assert carried["fresh_exit_code"] == 0 and carried["fresh_hash"] != r["trace_hash"]
        alone = subprocess_cli("run", "--entry", LEAKY, "--seed", str(r["seed"]))
        assert alone.code == 0 and f"trace_hash={carried['fresh_hash']}" in alone.out
        assert r["message"].startswith("depends on earlier seeds in this process: trace hash ")
        assert r["trace_hash"] in r["message"] and carried["fresh_hash"] in r["message"]
        assert carried["earlier"][0] == f"{LEAKY} seed=0"
        named = " ".join(carried["state"])
        assert "tests.cli.programs._RUNS: list of " in named
        assert "tests.cli.programs._remember (default argument 1): list of " in named
    assert "replay: none: the failure depends on seeds run earlier" in out
    assert "kelpie-dst run --entry" not in out  # no false replay line
    assert "tests.cli.programs._RUNS: list of 3 here, list of 1 in a fresh process" in out


def test_without_recheck_the_in_process_failure_is_reported(tmp_path: Path) -> None:
    code, _, data = _sweep(tmp_path, "--entry", LEAKY, "--seeds", "2", "-j", "1", "--no-recheck")
    assert code == 1 and data["results"][1]["failure_class"] == "invariant"
