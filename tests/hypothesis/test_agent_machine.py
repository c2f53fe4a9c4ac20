"""The agent server machine (tests/hypothesis/agent_machine.py, docs/hypothesis.md section 12).

* The server passes the ``ci`` profile through ``AgentService`` and through the real SDK over
  the simulated network, and the faults really bite (requests end rejected and unknown).
* Two planted bugs are found and shrunk, the report has the steps, the seed and a replay line,
  and the shrunk example replays with the same trace hash: from the printed steps as a script,
  from the example database, and from the printed line in a fresh pytest process.
* ``extended`` (slow): 200+ examples of each machine pass, with no Flaky error.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import attrs
import hypothesis
import pytest
from hypothesis import Phase
from hypothesis.database import DirectoryBasedExampleDatabase

from kelpie_dst.hypothesis import profile_settings, run_machine

from . import agent_machine
from .agent_machine import (
    AgentServerMachine,
    HttpAgentServerMachine,
    HttpQueuedEditMachine,
    OtidDroppingMachine,
    QueuedEditMachine,
)
from .failures import Found, find, replay_program, run_reproduce_line


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
    replay_program(queued, QueuedEditMachine, dict(vars(agent_machine)), monkeypatch)


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
    module = "tests.hypothesis.agent_machine"
    run_reproduce_line(queued, tmp_path, module, "QueuedEditMachine", "TestQueuedEdit")


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
