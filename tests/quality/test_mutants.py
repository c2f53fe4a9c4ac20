"""The mutation harness (``kelpie-dst mutate``) and the planted bugs of tests/quality/mutants.toml.

* The spec loads, and every mutant applies to the code as it is.
* The harness, end to end on a toy tree: it catches a planted race, verifies the catch (same
  trace hash in a fresh process, passes without the mutant), lets a harmless mutant survive,
  records, checks, refuses stale mutants, and never writes the working tree.
* CI-sized ``--check``: every recorded catch still fails the way it was recorded.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kelpie_dst import UsageError
from kelpie_dst._cli import main
from kelpie_dst._cli_mutate import _record
from kelpie_dst.mutate import (
    Catch,
    MutantStale,
    fired_label,
    interleave,
    load_catches,
    load_spec,
    save_catches,
)
from kelpie_dst.mutate._child import wrong_origin
from kelpie_dst.mutate._launch import Launcher

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tests/quality/mutants.toml"
AREAS = ("actors/", "agent/", "service/", "http/")


def kelpie_dst_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONHASHSEED="0")  # as the kelpie-dst launcher pins it
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "kelpie_dst", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


# -- the spec ------------------------------------------------------------------------------------


def test_the_spec_loads_and_every_mutant_applies() -> None:
    spec = load_spec(SPEC)
    assert spec.root == ROOT
    assert len(spec.mutants) >= 16
    for mutant in spec.mutants:
        assert mutant.breaks and "\n" not in mutant.breaks
        assert all(e.file.startswith("kelpie_agent/") for e in mutant.edits), mutant.name
        edited = mutant.check(spec.root)  # raises MutantStale if it no longer applies
        changed = 0
        for file, text in edited.items():
            before = (spec.root / file).read_text().splitlines()
            diff = difflib.unified_diff(before, text.splitlines(), lineterm="", n=0)
            changed += sum(1 for line in diff if line[:1] in "+-" and line[:3] not in "+++---")
        assert 0 < changed <= 16, f"{mutant.name}: a planted bug is a small edit ({changed})"
    for area in AREAS:  # spread over the whole server
        assert sum(m.category.startswith(area) for m in spec.mutants) >= 2, area


def test_a_mutant_no_longer_applies_when_its_snippet_is_not_there_exactly_once() -> None:
    spec = load_spec(SPEC)
    mutant = spec.mutants[0]
    edit = mutant.edits[0]
    source = (spec.root / edit.file).read_text()
    for text, what in (
        (source.replace(edit.find, ""), "does not occur"),
        (source + edit.find, "occurs 2 times"),
    ):
        with pytest.raises(MutantStale) as error:
            mutant.apply({edit.file: text})
        message = str(error.value)
        assert mutant.name in message and edit.file in message and what in message
        assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[[mutant]]\nname = 'x'", "breaks"),
        ("root = 'nowhere'\n[[mutant]]\nname = 'x'", "root"),
        ("bogus = 1", "bogus"),
        ("[[mutant]]\nname='x'\nbreaks='b'\ncategory='c'\nedit=[]", "edit"),
        (
            "[[mutant]]\nname='x'\nbreaks='b'\ncategory='c'\n"
            "[[mutant.edit]]\nfile='../etc/passwd'\nfind='a'\nreplace='b'",
            "file",
        ),
        (
            "[[mutant]]\nname='x'\nbreaks='b'\ncategory='c'\n"
            "[[mutant.edit]]\nfile='spec.toml'\nfind='a'\nreplace='a'",
            "replace",
        ),
        ("[[mutant]\n", "invalid TOML"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as error:
        load_spec(path)
    message = str(error.value)
    assert message.startswith(str(path)) and field in message and "\n" not in message


def test_seeds_interleave_across_scenarios() -> None:
    assert interleave(["a", "b"], ["duration=1s"], range(2)) == [
        ["a", ["duration=1s"], 0],
        ["b", ["duration=1s"], 0],
        ["a", ["duration=1s"], 1],
        ["b", ["duration=1s"], 1],
    ]


@pytest.mark.parametrize(
    ("kind", "message", "label"),
    [
        (None, "", "passed"),
        ("invariant", "AssertionError: invariant no_lost does not hold: x", "invariant no_lost"),
        ("invariant", "InvariantViolation: invariant fenced: 2 writes", "invariant fenced"),
        ("invariant", "AssertionError: overdrawn: -80", "invariant"),
        ("liveness", "deadlock at t=3s: no task can run", "liveness (deadlock)"),
        ("liveness", "liveness: the workload did not finish", "liveness"),
        ("crash", "KeyError: 'x'\nmore", "crash: KeyError"),
        ("nondeterminism", "guard tripped", "nondeterminism"),
    ],
)
def test_what_fired(kind: str | None, message: str, label: str) -> None:
    assert fired_label(kind, message) == label


def test_catches_round_trip_relative_to_their_file(tmp_path: Path) -> None:
    path = tmp_path / "spec_caught.toml"
    catch = Catch("m", "toy", str(tmp_path / "scenarios/toy.toml"), ("duration=1s",), 3, "x")
    save_catches(
        path, "spec.toml", [catch, Catch("a", "agent_chaos", "agent_chaos", (), 0, "y")], ["a", "m"]
    )
    text = path.read_text()
    assert text.index('mutant = "a"') < text.index('mutant = "m"')  # the spec's order
    assert 'ref = "scenarios/toy.toml"' in text  # relative to the file
    loaded = load_catches(path)
    assert loaded["m"].ref == str(tmp_path / "scenarios/toy.toml")
    assert loaded["m"].overrides == ("duration=1s",) and loaded["m"].seed == 3
    assert loaded["a"].ref == "agent_chaos"


def test_recording_drops_the_records_of_mutants_no_longer_in_the_spec(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = load_spec(toy / "mutants.toml")
    kept = Catch("no-lock", "toy", str(toy / "scenarios/toy.toml"), (), 1, "crash: AssertionError")
    gone = Catch("renamed-away", "toy", str(toy / "scenarios/toy.toml"), (), 2, "x")
    save_catches(spec.caught_path, spec.path.name, [kept, gone], ["no-lock", "renamed-away"])
    _record(spec, [])
    assert set(load_catches(spec.caught_path)) == {"no-lock"}
    assert "dropped the records of renamed-away" in capsys.readouterr().out


# -- the harness, on a toy tree ------------------------------------------------------------------

TOY_APP = """\
import trio


async def main():
    balance = {"value": 100}
    lock = trio.Lock()

    async def withdraw(amount):
        async with lock:
            if balance["value"] >= amount:
                await trio.sleep(0)
                balance["value"] -= amount

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(withdraw, 60)
    assert balance["value"] >= 0, f"overdrawn: {balance['value']}"
"""
TOY_SPEC = """\
[defaults]
scenarios = ["scenarios/toy.toml"]
seeds = 4

[[mutant]]
name = "no-lock"
breaks = "two withdrawals can both pass the balance check"
category = "toy"
[[mutant.edit]]
file = "toybank/app.py"
find = "async with lock:"
replace = "if True:"

[[mutant]]
name = "message"
breaks = "nothing: an equivalent mutant, to survive"
category = "toy"
[[mutant.edit]]
file = "toybank/app.py"
find = "overdrawn: "
replace = "overdrawn by: "
"""


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    (tmp_path / "toybank").mkdir()
    (tmp_path / "toybank/__init__.py").write_text("")
    (tmp_path / "toybank/app.py").write_text(TOY_APP)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios/toy.toml").write_text(
        'name = "toy"\nduration = "10s"\n[workload]\nentry = "toybank.app:main"\n'
    )
    (tmp_path / "mutants.toml").write_text(TOY_SPEC)
    return tmp_path


def _tree(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_the_harness_catches_verifies_records_and_checks(toy: Path) -> None:
    before = _tree(toy / "toybank")
    done = kelpie_dst_cli(
        "mutate", "--spec", "mutants.toml", "--json", "out.json", "--record", cwd=toy
    )
    assert done.returncode == 1, done.stdout + done.stderr  # one mutant survives
    assert _tree(toy / "toybank") == before  # the working tree is never written
    report = json.loads((toy / "out.json").read_text())
    rows = {row["name"]: row for row in report["mutants"]}
    caught, survivor = rows["no-lock"], rows["message"]
    assert caught["status"] == "caught" and caught["runs_to_catch"] >= 1
    assert caught["catch"]["fired"] == "invariant"
    assert caught["verification"]["reproduced"] and caught["verification"]["clean_passes"]
    assert caught["replay"].startswith("kelpie-dst mutate --spec mutants.toml --only no-lock")
    assert survivor["status"] == "survived" and survivor["runs"] == 4
    assert report["summary"]["good"] == 1 and report["summary"]["mutants"] == 2
    assert "caught 1 of 2 mutants" in done.stdout
    assert "caught     no-lock: toy seed" in done.stdout
    recorded = load_catches(toy / "mutants_caught.toml")
    assert set(recorded) == {"no-lock"}
    # --check: the recorded catch holds; the survivor has none, which fails the check
    checked = kelpie_dst_cli("mutate", "--spec", "mutants.toml", "--check", cwd=toy)
    assert checked.returncode == 1
    assert "holds      no-lock" in checked.stdout and "UNRECORDED message" in checked.stdout
    only = kelpie_dst_cli(
        "mutate", "--spec", "mutants.toml", "--check", "--only", "no-lock", cwd=toy
    )
    assert only.returncode == 0, only.stdout + only.stderr
    assert "1 of 1 recorded catches hold" in only.stdout
    # the replay line reproduces the catch with the mutant applied
    replay = kelpie_dst_cli(*caught["replay"].split()[1:], cwd=toy)
    assert replay.returncode == 1 and "reproduced: same trace hash" in replay.stdout
    assert "overdrawn" in replay.stdout
    # a change to the code that removes the snippet makes the mutant stale
    app = toy / "toybank/app.py"
    app.write_text(app.read_text().replace("async with lock:", "async with  lock:"))
    stale = kelpie_dst_cli(
        "mutate", "--spec", "mutants.toml", "--check", "--only", "no-lock", cwd=toy
    )
    assert stale.returncode == 1
    assert "STALE" in stale.stdout
    assert "mutant 'no-lock' no longer applies: in toybank/app.py, 'async with lock:'" in (
        stale.stdout
    )


def test_a_child_refuses_to_run_code_that_is_not_the_overlay(toy: Path, tmp_path: Path) -> None:
    empty = tmp_path / "not-an-overlay"
    empty.mkdir()
    launcher = Launcher(toy, timeout=120)
    job = {"overlay": str(empty), "modules": {"toybank.app": "toybank/app.py"}, "items": []}
    run = launcher.run(job, empty)
    assert run.error is not None and "toybank.app was imported from" in run.error
    assert str(toy / "toybank/app.py") in run.error and run.results == ()


def test_wrong_origin_names_the_module_and_both_places(tmp_path: Path) -> None:
    problem = wrong_origin({"json": "json/__init__.py"}, tmp_path)
    assert problem is not None and problem.startswith("json was imported from")
    assert str(tmp_path / "json/__init__.py") in problem
    assert wrong_origin({"json": "json/__init__.py"}, Path(json.__file__).parents[1]) is None


@pytest.mark.parametrize(
    "args",
    [
        ["--check", "--list"],
        ["--check", "--seeds", "3"],
        ["--list", "--record"],
        ["--replay", "kd1.x"],
        ["--only", "nope"],
        ["--scenario", "no_such_scenario"],
        ["--timeout", "soon"],
        ["--only", "no-lock", "--replay", "kd1.damaged"],
    ],
)
def test_mutate_usage_errors_are_one_line(
    toy: Path, args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(toy)
    with pytest.raises(SystemExit) as exit_info:
        main(["mutate", "--spec", "mutants.toml", *args])
    assert exit_info.value.code == 64
    err = capsys.readouterr().err
    assert err.startswith("kelpie-dst: error:") and err.count("\n") == 1


# -- the real spec: CI replays the recorded catches ---------------------------------------------


# Two recorded catches that share one seed (agent_chaos seed 0), so CI runs one clean seed and
# two mutated ones that fail early: well under a minute. The whole list runs with `-m slow` (and
# `kelpie-dst mutate --check` runs it by hand).
CI_SUBSET = (
    "fence-reads-owner-outside-txn",  # actors: agent_chaos seed 0, single_activation
    "http-create-drops-read-only",  # HTTP API: agent_chaos seed 0, memory_blocks_within_limits
)


def check_recorded(names: list[str], tmp_path: Path) -> None:
    """`kelpie-dst mutate --check` over ``names``: each recorded seed still fails the recorded
    way with its mutant, and passes without it."""
    only = [arg for name in names for arg in ("--only", name)]
    report = tmp_path / "check.json"
    done = kelpie_dst_cli(
        "mutate", "--check", "--jobs", "2", "--json", str(report), *only, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(report.read_text())["mutants"]
    assert [(row["name"], row["status"]) for row in rows] == [(name, "holds") for name in names]


def test_recorded_catches_still_hold(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    recorded = load_catches(spec.caught_path)
    missing = [name for name in CI_SUBSET if name not in recorded]
    assert not missing, f"no recorded catch for {missing}: run `kelpie-dst mutate --record`"
    check_recorded([m.name for m in spec.mutants if m.name in CI_SUBSET], tmp_path)


@pytest.mark.slow
def test_every_recorded_catch_still_holds(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    recorded = load_catches(spec.caught_path)
    check_recorded([m.name for m in spec.mutants if m.name in recorded], tmp_path)


def test_the_spec_names_are_the_mutants_of_its_catches() -> None:
    spec = load_spec(SPEC)
    known = {m.name for m in spec.mutants}
    assert set(load_catches(spec.caught_path)) <= known


def test_list_and_diff(
    toy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(toy)
    main(["mutate", "--spec", "mutants.toml", "--list"])
    listed = capsys.readouterr().out
    assert "no-lock" in listed and "message" in listed and "toybank/app.py" in listed
    assert listed.count(" yes ") == 2  # both apply
    main(["mutate", "--spec", "mutants.toml", "--diff", "--only", "no-lock"])
    diff = capsys.readouterr().out
    assert diff.startswith("# no-lock (toy): two withdrawals can both pass the balance check")
    assert "-        async with lock:\n+        if True:\n" in diff
    assert "--- a/toybank/app.py\n+++ b/toybank/app.py\n" in diff


# Shipped scenarios that exercise kelpie_dst alone (no kelpie_agent code), so no planted bug in
# kelpie_agent can show in them.
NOT_AGENT_CODE = {"bank", "http_echo"}


def test_the_default_scenario_set_is_every_scenario_that_runs_agent_code() -> None:
    shipped = {path.stem for path in (ROOT / "scenarios").glob("*.toml")}
    listed = load_spec(SPEC).defaults.scenarios
    assert len(set(listed)) == len(listed), "a scenario is listed twice"
    assert set(listed) == shipped - NOT_AGENT_CODE, (
        "tests/quality/mutants.toml's defaults.scenarios must name every shipped scenario "
        "that runs kelpie_agent's code"
    )
