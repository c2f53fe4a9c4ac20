"""Acceptance of #8 on the toy service: the planted bug is found, shrunk to <= 3 steps, and
replays identically (same trace hash) from the example database, from the printed
KELPIE_HYPOTHESIS_REPRODUCE line in a fresh process, and from the printed steps as a script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import hypothesis
import pytest
from hypothesis import Phase
from hypothesis.database import DirectoryBasedExampleDatabase

import kelpie_dst
from kelpie_dst.examples.toy_kv_service import FixedToyKVMachine, Get, Put, ToyKVMachine
from kelpie_dst.hypothesis import profile_settings, run_machine


@attrs.frozen
class Found:
    """What a failing run printed, parsed from the exception's notes."""

    error: AssertionError
    notes: list[str]
    program: list[str]  # the printed lines between "state = ..." and "state.teardown()"
    steps: list[str]  # the rule calls among them
    seed: int
    trace_hash: str
    reproduce: str

    @property
    def message(self) -> str:
        return str(self.error).splitlines()[0]

    @classmethod
    def parse(cls, error: AssertionError) -> Found:
        notes = list(error.__notes__)
        text = "\n".join(notes)
        start = next(i for i, line in enumerate(notes) if line.startswith("state = "))
        end = notes.index("state.teardown()")
        program = notes[start + 1 : end]
        steps = [
            line
            for line in program
            if line.startswith("state.") and not line.startswith("state.cache_agrees_with_disk")
        ]
        summary = re.search(r"simulation seed=(\d+) .* trace_hash=([0-9a-f]{32})", text)
        reproduce = re.search(r"KELPIE_HYPOTHESIS_REPRODUCE='([^']+)'", text)
        assert summary and reproduce, text
        return cls(error, notes, program, steps, int(summary[1]), summary[2], reproduce[1])


def find(machine: type[ToyKVMachine] = ToyKVMachine, **overrides: object) -> Found:
    with pytest.raises(AssertionError) as info:
        run_machine(machine, settings=profile_settings("ci", **overrides))
    return Found.parse(info.value)


@pytest.fixture(scope="module")
def found() -> Found:
    """One find-and-shrink run of the CI profile (derandomized: the same every time)."""
    return find()


def test_the_planted_bug_is_found_and_shrunk_to_at_most_3_steps(found: Found) -> None:
    assert re.match(r"cache has (\w)=None, disk has \d+", found.message), found.message
    assert 1 <= len(found.steps) <= 3, found.steps
    # The race needs a PUT and a GET of one key at the same time.
    key = found.message[len("cache has ")]
    assert any(f"Put('{key}'," in step and f"Get('{key}')" in step for step in found.steps)
    assert f"rule_steps={len(found.steps)}" in "\n".join(found.notes)


def test_the_saved_example_replays_from_the_database_with_the_same_trace_hash(
    tmp_path: Path,
) -> None:
    @hypothesis.seed(8)  # randomized generation (the database needs it), but a fixed run
    class Seeded(ToyKVMachine):
        pass

    database = DirectoryBasedExampleDatabase(tmp_path)
    saved = find(
        Seeded, derandomize=False, database=database, phases=[Phase.generate], max_examples=300
    )
    assert any(path.is_file() for path in tmp_path.rglob("*"))  # the example was saved
    replayed = find(Seeded, derandomize=False, database=database, phases=[Phase.reuse])
    assert replayed.steps == saved.steps
    assert (replayed.seed, replayed.trace_hash) == (saved.seed, saved.trace_hash)


def test_the_reproduce_line_replays_in_a_fresh_pytest_process(found: Found, tmp_path: Path) -> None:
    (tmp_path / "test_replay_toy.py").write_text(
        textwrap.dedent("""
            from kelpie_dst.examples.toy_kv_service import ToyKVMachine
            TestToyKV = ToyKVMachine.TestCase
        """)
    )
    env = dict(os.environ, KELPIE_HYPOTHESIS_REPRODUCE=found.reproduce, PYTHONHASHSEED="99")
    env.pop("KELPIE_HYPOTHESIS_PROFILE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_replay_toy.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert found.message in proc.stdout
    assert f"trace_hash={found.trace_hash}" in proc.stdout, proc.stdout
    assert "python -m pytest 'test_replay_toy.py::TestToyKV::runTest'" in proc.stdout


def test_the_printed_steps_replay_as_a_script_with_dst_seed(
    found: Found, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DST_SEED", str(found.seed))
    namespace: dict[str, object] = {"ToyKVMachine": ToyKVMachine, "Get": Get, "Put": Put}
    exec("state = ToyKVMachine()", namespace)
    state = namespace["state"]
    assert isinstance(state, ToyKVMachine)
    try:
        with pytest.raises(AssertionError, match=re.escape(found.message)):
            exec("\n".join(found.program), namespace)
    finally:
        state.teardown()
    assert state.final_trace_hash == found.trace_hash
    assert kelpie_dst.current_simulation() is None


def test_the_fixed_service_passes_the_ci_profile() -> None:
    runs: list[int] = []

    class Counted(FixedToyKVMachine):
        def teardown(self) -> None:
            runs.append(self.rule_steps)
            super().teardown()

    run_machine(Counted, settings=profile_settings("ci"))
    assert len(runs) >= 30
    assert sum(runs) >= 300  # the examples really ran steps


@pytest.mark.slow
def test_the_fixed_service_passes_the_extended_profile() -> None:
    runs: list[int] = []

    class Counted(FixedToyKVMachine):
        def teardown(self) -> None:
            runs.append(self.rule_steps)
            super().teardown()

    run_machine(Counted, settings=profile_settings("extended", database=None))
    assert len(runs) >= 200
