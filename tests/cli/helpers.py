"""Running ``kelpie-dst`` in this process (fast) or as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from kelpie_dst._cli import main

ROOT = Path(__file__).resolve().parents[2]
QUALITY = ROOT / "tests" / "quality" / "scenarios"


@attrs.frozen
class Outcome:
    code: int
    out: str
    err: str


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> Outcome:
    """``kelpie-dst ARGS`` in this process: the exit code and what it printed."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def subprocess_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> Outcome:
    """``python -m kelpie_dst ARGS`` in a fresh process, with PYTHONHASHSEED pinned (so it
    does not re-execute) unless ``env`` says otherwise."""
    full = dict(os.environ, PYTHONHASHSEED="0")
    full.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "kelpie_dst", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in full.items() if v is not None},
        cwd=cwd or ROOT,
        check=False,
        timeout=timeout,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def assert_usage_error(outcome: Outcome) -> str:
    """Exit 64, exactly one line on stderr, no traceback anywhere; returns the line."""
    assert outcome.code == 64, outcome
    lines = outcome.err.strip().splitlines()
    assert len(lines) == 1, outcome.err
    assert lines[0].startswith("kelpie-dst: error: "), lines[0]
    assert "Traceback" not in outcome.out + outcome.err
    return lines[0]
