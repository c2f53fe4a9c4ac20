"""Helpers for the tests that make a machine fail on purpose and check what it printed.

``find(machine)`` runs a machine that must fail and parses the exception's notes into a
:class:`Found`; ``replay_program`` runs the printed steps as a script; ``run_reproduce_line``
runs the printed ``KELPIE_HYPOTHESIS_REPRODUCE=... python -m pytest ...`` line in a fresh
process; ``fresh_python`` runs a snippet in a fresh interpreter with another hash seed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import stateful

import kelpie_dst
from kelpie_dst.hypothesis import SimStateMachine, profile_settings, run_machine

ROOT = Path(__file__).resolve().parents[2]


@attrs.frozen
class Found:
    """What a failing run printed, parsed from the exception's notes."""

    error: AssertionError
    notes: list[str]
    program: list[str]  # the printed lines between "state = ..." and "state.teardown()"
    steps: list[str]  # the rule calls among them (the invariant checks left out)
    seed: int
    trace_hash: str
    reproduce: str  # the KELPIE_HYPOTHESIS_REPRODUCE value
    target: str  # the pytest node id of the printed reproduce line

    @property
    def message(self) -> str:
        return str(self.error).splitlines()[0]

    @classmethod
    def parse(cls, error: AssertionError, machine: type[SimStateMachine]) -> Found:
        notes = list(error.__notes__)
        text = "\n".join(notes)
        start = next(i for i, line in enumerate(notes) if line.startswith("state = "))
        program = notes[start + 1 : notes.index("state.teardown()")]
        invariants = {
            name
            for name in dir(machine)
            if hasattr(getattr(machine, name, None), stateful.INVARIANT_MARKER)
        }
        steps = [line for line in program if _called(line) not in invariants]
        summary = re.search(r"simulation seed=(\d+) .* trace_hash=([0-9a-f]{32})", text)
        replay = re.search(r"KELPIE_HYPOTHESIS_REPRODUCE='([^']+)' python -m pytest '(.+)'", text)
        assert summary and replay, text
        return cls(error, notes, program, steps, int(summary[1]), summary[2], replay[1], replay[2])


def _called(line: str) -> str | None:
    """The method of a printed ``state.name()`` line (how an invariant check prints)."""
    match = re.fullmatch(r"state\.(\w+)\(\)", line)
    return match[1] if match else None


def find(machine: type[SimStateMachine], **overrides: object) -> Found:
    """Run ``machine`` under the CI profile (with ``overrides``); it must fail."""
    with pytest.raises(AssertionError) as info:
        run_machine(machine, settings=profile_settings("ci", **overrides))
    return Found.parse(info.value, machine)


def replay_program(
    found: Found,
    machine: type[SimStateMachine],
    namespace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run the printed steps as a script with ``DST_SEED`` set to the printed seed: they must
    raise the same assertion and end on the same trace hash, leaving no simulation behind."""
    monkeypatch.setenv("DST_SEED", str(found.seed))
    namespace = {**namespace, machine.__name__: machine}
    exec(f"state = {machine.__name__}()", namespace)
    state = namespace["state"]
    assert isinstance(state, machine)
    try:
        with pytest.raises(AssertionError, match=re.escape(found.message)):
            exec("\n".join(found.program), namespace)
    finally:
        state.teardown()
    assert state.final_trace_hash == found.trace_hash
    assert kelpie_dst.current_simulation() is None


def run_reproduce_line(
    found: Found, tmp_path: Path, module: str, machine: str, test_name: str
) -> str:
    """Write ``test_replay.py`` with ``{test_name} = {machine}.TestCase`` and run pytest on
    it in a fresh process, as the printed reproduce line says. Returns pytest's output, after
    checking that it failed with the same message and trace hash."""
    (tmp_path / "test_replay.py").write_text(
        f"from {module} import {machine}\n{test_name} = {machine}.TestCase\n"
    )
    env = dict(os.environ, KELPIE_HYPOTHESIS_REPRODUCE=found.reproduce, PYTHONHASHSEED="99")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("KELPIE_HYPOTHESIS_PROFILE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_replay.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert found.message in proc.stdout
    assert f"trace_hash={found.trace_hash}" in proc.stdout, proc.stdout
    assert f"python -m pytest 'test_replay.py::{test_name}::runTest'" in proc.stdout
    return proc.stdout


def fresh_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (another PYTHONHASHSEED, the default Hypothesis
    profile) from the repository root; return the last line it printed."""
    env = dict(os.environ, PYTHONHASHSEED="4321")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("KELPIE_HYPOTHESIS_PROFILE", None)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return proc.stdout.splitlines()[-1]
