"""The error contract: every malformed scenario file and every bad argument gives ONE line
naming the file and the field (and the allowed values), exit 64, and no traceback."""

from __future__ import annotations

import base64
import zlib
from pathlib import Path

import pytest

from .helpers import assert_usage_error, cli, subprocess_cli

BAD = Path(__file__).parent / "bad"
FILES = sorted(BAD.glob("*.toml"))
BAD_CORPORA = sorted(p for p in (Path(__file__).parent / "bad_corpus").iterdir() if p.is_dir())
# Files that cannot carry a "# expect:" line of their own.
NOT_TEXT = {
    "binary": "not UTF-8 text: byte 0x80 at offset 128; a scenario file is TOML",
    "utf16": "not UTF-8 text (it looks like UTF-16): byte 0xff at offset 0",
}


def test_the_corpus_is_large() -> None:
    assert len(FILES) >= 20


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_malformed_scenario_file(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if path.stem in NOT_TEXT:
        expected = NOT_TEXT[path.stem]
    else:
        expected = path.read_text().splitlines()[0].removeprefix("# expect: ")
    line = assert_usage_error(cli(capsys, "run", str(path), "--seed", "1"))
    assert line.startswith(f"kelpie-dst: error: {path}: "), line
    assert expected in line, (expected, line)


@pytest.mark.parametrize("corpus", BAD_CORPORA, ids=[p.name for p in BAD_CORPORA])
def test_malformed_seed_corpus(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (file,) = corpus.glob("*.txt")
    expected = file.read_text().splitlines()[0].removeprefix("# expect: ")
    outcome = cli(capsys, "sweep", "--corpus", str(corpus))
    line = assert_usage_error(outcome)
    assert line.startswith(f"kelpie-dst: error: {file}:2: "), line
    assert expected in line, (expected, line)
    assert "sweeping" not in outcome.out  # refused before any seed ran


def test_a_huge_file_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "huge.toml"
    path.write_bytes(b"# " + b"x" * (5 << 20) + b"\n")
    line = assert_usage_error(cli(capsys, "run", str(path), "--seed", "1"))
    assert line == f"kelpie-dst: error: {path}: is over 4194304 bytes: not a scenario file"


def test_output_paths_are_checked_before_any_seed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    cases = [
        (["sweep", "kv_linearizability", "--json", "/nonexistent/x.json"], "--json"),
        (["sweep", "kv_linearizability", "--junit", str(tmp_path)], "is a directory"),
        (["run", "kv_linearizability", "--seed", "1", "--trace", "/nonexistent/t"], "--trace"),
        (["shrink", "kv_linearizability", "--seed", "1", "--out", "/nonexistent/x"], "--out"),
    ]
    import os

    if os.geteuid() != 0:  # root may write anywhere
        cases.append((["sweep", "bank", "--json", str(locked / "x.json")], "Permission denied"))
    for args, expected in cases:
        outcome = cli(capsys, *args)
        assert expected in assert_usage_error(outcome), args
        assert "sweeping" not in outcome.out and "running" not in outcome.out, args
    assert list(tmp_path.iterdir()) == [locked]  # nothing created on the way


def _token(raw: bytes) -> str:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return "kd1." + base64.urlsafe_b64encode(packer.compress(raw) + packer.flush()).decode()


BAD_ARGS = [
    (["run"], "exactly one"),
    (["run", "kv_linearizability", "--entry", "kelpie_dst.examples.bank:main"], "exactly one"),
    (["run", "no_such_scenario"], "unknown scenario 'no_such_scenario' (allowed: "),
    (["run", "missing/file.toml"], "no scenario file 'missing/file.toml'"),
    (["run", "kv_linearizability", "--seed", "abc"], "a seed is a whole number from 0 to"),
    (["run", "kv_linearizability", "--seed", "-1"], "got '-1'"),
    (["run", "kv_linearizability", "--seed", str(2**64)], f"got {2**64}"),
    (["sweep", "kv_linearizability", "--start", "-1"], "a seed is a whole number from 0 to"),
    (["sweep", "kv_linearizability", "--start", str(2**64 - 1), "--seeds", "2"], "the largest"),
    (["shrink", "kv_linearizability", "--seed", "-1"], "a seed is a whole number from 0 to"),
    (
        ["check-determinism", "--entry", "kelpie_dst.examples.bank:main", "--seed", "-1"],
        "a seed is a whole number from 0 to",
    ),
    (["replay", _token(b'{"s": "kv_linearizability", "n": -1}')], "replay token: seed -1"),
    (["run", str(BAD)], "is a directory, not a scenario file"),
    (
        ["run", "kv_linearizability", "--set", "workload.params.clients=1000000000"],
        "workload.params.clients: must be from 1 to 200 (the workload's bounds), got 1000000000"
        " (set by --set)",
    ),
    (["sweep", "kv_linearizability", "--seeds", str(10**7)], "Invalid value for '--seeds'"),
    (["run", "kv_linearizability", "--set", "noequals"], "--set 'noequals': expected PATH=VALUE"),
    (["run", "kv_linearizability", "--set", "bad path=1"], "expected PATH=VALUE"),
    (
        ["run", "kv_linearizability", "--set", "faults.network.partition.probability=2"],
        "faults.network.partition.probability: a probability must be within [0, 1], got 2.0 "
        "(set by --set)",
    ),
    (
        ["run", "kv_linearizability", "--set", "workload.params.clients=abc"],
        "workload.params.clients: expected an integer, got string 'abc' (set by --set)",
    ),
    (
        ["run", "kv_linearizability", "--set", "duration.x=1"],
        "--set duration.x=1: duration is string '1m', not a table",
    ),
    (["run", "kv_linearizability", "--set", "nope=1"], "nope: unknown field (set by --set)"),
    (["run", "kv_linearizability", "--fault", "disk.melt=0.1"], "unknown fault type 'disk.melt'"),
    (["run", "kv_linearizability", "--max-time", "10s"], "use --set duration"),
    (["run", "--entry", "kelpie_dst.examples.bank:main", "--set", "x=1"], "--set is for"),
    (["sweep"], "at least one SCENARIO or --corpus"),
    (["sweep", "kv_linearizability", "--shard", "3/2"], "K must be between 1 and N"),
    (["sweep", "kv_linearizability", "--shard", "x"], "--shard takes K/N"),
    (["sweep", "kv_linearizability", "--seeds", "0"], "Invalid value for '--seeds'"),
    (["sweep", "kv_linearizability", "--jobs", "0"], "Invalid value for '--jobs'"),
    (["sweep", "kv_linearizability", "--time-budget", "soon"], "bad duration 'soon'"),
    (["sweep", "--corpus", "/nonexistent/seeds"], "no such file or directory"),
    (["sweep", "--corpus", str(Path(__file__).parent / "bad_corpus" / "no_note")], "has no note"),
    (["sweep", "bank", "--entry", "kelpie_dst.examples.bank:main"], "or --entry, not both"),
    (["sweep", "--entry", "no_such_module:main"], "no module named 'no_such_module'"),
    (["sweep", "--entry", "kelpie_dst.examples.bank:main", "--fault", "x.y=0.1"], "unknown fault"),
    (["sweep", "bank", "--max-time", "1s"], "--max-time is for --entry sweeps"),
    (["sweep", "bank", "--cluster", "tcp://127.0.0.1:1", "--jobs", "2"], "a --cluster has its"),
    (["replay", "garbage"], "not a replay token"),
    (["replay", "kd1.!!!!"], "damaged replay token"),
    (["replay", _token(b"[1, 2]")], "damaged replay token"),
    (["replay", _token(b'{"s": 3, "n": 1}')], "damaged replay token"),
    (["shrink", "kv_linearizability"], "Missing option '--seed'"),
    (["list", "--path", "/nonexistent/dir"], "no such directory"),
    (["sweep", "kv_linearizability", "--bogus"], "No such option"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_ARGS, ids=[" ".join(a) for a, _ in BAD_ARGS])
def test_bad_arguments(args: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_usage_error(cli(capsys, *args))
    assert expected in line, (expected, line)


def test_a_seed_that_passes_has_nothing_to_shrink(capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_usage_error(
        cli(capsys, "shrink", "kv_linearizability", "--seed", "0", "--set", "workload.params.ops=2")
    )
    assert "does not fail, so there is nothing to shrink" in line


def test_in_a_real_process_too() -> None:
    """The same contract from the real command line (two samples; the rest run in-process)."""
    for args in (["run", str(BAD / "fault_unknown_type.toml")], ["replay", "garbage"]):
        assert_usage_error(subprocess_cli(*args))
