"""The agent server machine (tests/hypothesis/agent_machine.py, docs/hypothesis.md section 12).

* The server passes the ``ci`` profile through ``AgentService`` and through the real SDK over
  the simulated network, and the faults really bite (requests end rejected and unknown).
* Two planted bugs are found and shrunk, the report has the steps, the seed and a replay line,
  and the shrunk example replays with the same trace hash: from the printed steps as a script,
  from the example database, and from the printed line in a fresh pytest process.
* ``extended`` (slow): 200+ examples of each machine pass, with no Flaky error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import attrs
import hypothesis
import pytest
from hypothesis import Phase
from hypothesis.database import DirectoryBasedExampleDatabase

import kelpie_dst
from kelpie_dst.hypothesis import profile_settings, run_machine

from . import agent_machine
from .agent_machine import (
    AgentServerMachine,
    HttpAgentServerMachine,
    HttpQueuedEditMachine,
    OtidDroppingMachine,
    QueuedEditMachine,
)

ROOT = Path(__file__).resolve().parents[2]


@attrs.define
class Runs:
    """What every example of a run did."""

    steps: list[int] = attrs.field(factory=list)
    checks: int = 0
    tally: Counter[str] = attrs.field(factory=Counter)


def run(machine: type[AgentServerMachine], profile: str, **overrides: object) -> Runs:
    runs = Runs()

    class Counted(machine):  # type: ignore[misc, valid-type]
        def teardown(self) -> None:
            runs.steps.append(self.rule_steps)
            runs.checks += self.checks
            runs.tally.update(self.tally)
            super().teardown()

    Counted.__name__ = Counted.__qualname__ = machine.__name__
    run_machine(Counted, settings=profile_settings(profile, database=None, **overrides))
    return runs


def outcomes(runs: Runs, outcome: str) -> int:
    return sum(n for key, n in runs.tally.items() if key.endswith(f".{outcome}"))


def test_the_service_machine_passes_the_ci_profile_and_the_faults_bite() -> None:
    runs = run(AgentServerMachine, "ci")
    assert len(runs.steps) >= 40 and sum(runs.steps) >= 600
    assert runs.checks >= 300
    for request in ("create", "delete", "send", "stream", "edit", "insert", "search"):
        assert runs.tally[f"{request}.ok"] > 0, (request, runs.tally)
    assert outcomes(runs, "rejected") >= 20 and outcomes(runs, "unknown") >= 20, runs.tally


def test_the_http_machine_passes_the_ci_profile() -> None:
    runs = run(HttpAgentServerMachine, "ci", max_examples=10)
    assert len(runs.steps) >= 10 and runs.checks >= 40
    assert outcomes(runs, "ok") >= 20 and outcomes(runs, "unknown") >= 5, runs.tally


# -- planted bugs ---------------------------------------------------------------------------------
@attrs.frozen
class Found:
    """What a failing run printed (the exception's notes)."""

    message: str
    program: list[str]  # the printed lines between "state = ..." and "state.teardown()"
    steps: list[str]  # the rule calls among them
    seed: int
    trace_hash: str
    reproduce: str
    target: str

    @classmethod
    def parse(cls, error: AssertionError) -> Found:
        notes = list(error.__notes__)
        text = "\n".join(notes)
        start = next(i for i, line in enumerate(notes) if line.startswith("state = "))
        program = notes[start + 1 : notes.index("state.teardown()")]
        steps = [line for line in program if "agrees_with_model" not in line]
        summary = re.search(r"simulation seed=(\d+) .* trace_hash=([0-9a-f]{32})", text)
        replay = re.search(r"KELPIE_HYPOTHESIS_REPRODUCE='([^']+)' python -m pytest '(.+)'", text)
        assert summary and replay, text
        message = str(error).splitlines()[0]
        return cls(message, program, steps, int(summary[1]), summary[2], replay[1], replay[2])


def find(machine: type[AgentServerMachine], **overrides: object) -> Found:
    with pytest.raises(AssertionError) as info:
        run_machine(machine, settings=profile_settings("ci", **overrides))
    return Found.parse(info.value)


@pytest.fixture(scope="module")
def queued() -> Found:
    return find(QueuedEditMachine)


def test_an_edit_acknowledged_before_it_is_applied_is_found_and_shrunk(queued: Found) -> None:
    assert re.fullmatch(
        r"agent-\S+ block (human|persona) is .*, expected one of .*", queued.message
    )
    assert queued.steps[0] == "agents_0 = state.first_agent()"
    assert 2 <= len(queued.steps) <= 3, queued.steps
    assert any(step.startswith("state.edit_block(agent=agents_0") for step in queued.steps)
    assert queued.target.endswith(
        "test_an_edit_acknowledged_before_it_is_applied_is_found_and_shrunk"
    )


def test_a_service_that_loses_the_clients_otid_is_found() -> None:
    found = find(OtidDroppingMachine)
    assert re.fullmatch(
        r"agent-\S+ user messages: \{'otid-\S+'\} present, but never sent", found.message
    )
    assert any(step.startswith("state.send_message(") for step in found.steps), found.steps
    assert len(found.steps) <= 3, found.steps


def test_the_printed_steps_replay_as_a_script(
    queued: Found, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DST_SEED", str(queued.seed))
    namespace: dict[str, object] = dict(vars(agent_machine))
    exec("state = QueuedEditMachine()", namespace)
    state = namespace["state"]
    assert isinstance(state, QueuedEditMachine)
    try:
        with pytest.raises(AssertionError, match=re.escape(queued.message)):
            exec("\n".join(queued.program), namespace)
    finally:
        state.teardown()
    assert state.final_trace_hash == queued.trace_hash
    assert kelpie_dst.current_simulation() is None


def test_the_saved_example_replays_from_the_database_with_the_same_trace_hash(
    tmp_path: Path,
) -> None:
    @hypothesis.seed(3)  # randomized generation (the database needs it), but a fixed run
    class Seeded(QueuedEditMachine):
        pass

    database = DirectoryBasedExampleDatabase(tmp_path)
    saved = find(Seeded, derandomize=False, database=database, phases=[Phase.generate])
    assert any(path.is_file() for path in tmp_path.rglob("*"))
    replayed = find(Seeded, derandomize=False, database=database, phases=[Phase.reuse])
    assert (replayed.steps, replayed.seed) == (saved.steps, saved.seed)
    assert replayed.trace_hash == saved.trace_hash


def test_the_reproduce_line_replays_in_a_fresh_pytest_process(
    queued: Found, tmp_path: Path
) -> None:
    (tmp_path / "test_replay_agents.py").write_text(
        textwrap.dedent("""
            from tests.hypothesis.agent_machine import QueuedEditMachine
            TestQueuedEdit = QueuedEditMachine.TestCase
        """)
    )
    env = dict(os.environ, KELPIE_HYPOTHESIS_REPRODUCE=queued.reproduce, PYTHONHASHSEED="99")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("KELPIE_HYPOTHESIS_PROFILE", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [*command, "test_replay_agents.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert queued.message in proc.stdout
    assert f"trace_hash={queued.trace_hash}" in proc.stdout, proc.stdout
    assert "python -m pytest 'test_replay_agents.py::TestQueuedEdit::runTest'" in proc.stdout


# -- the extended profile -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("machine", [AgentServerMachine, HttpAgentServerMachine])
def test_the_extended_profile_passes(machine: type[AgentServerMachine]) -> None:
    runs = run(machine, "extended")  # a Flaky error would fail the test
    assert len(runs.steps) >= 200


@pytest.mark.slow
def test_the_planted_edit_bug_is_found_through_the_sdk() -> None:
    found = find(HttpQueuedEditMachine)  # ~400 examples, a few minutes
    assert re.fullmatch(r"agent-\S+ block (human|persona) is .*, expected one of .*", found.message)
    assert len(found.steps) <= 3, found.steps
