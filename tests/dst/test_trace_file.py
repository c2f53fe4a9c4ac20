"""Trace files: saved by path (plain or gzip), loaded back losslessly, with the run's hash."""

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import kelpie_dst
from kelpie_dst import UsageError
from kelpie_dst._trace import Event, first_divergence, load_trace, read_trace
from kelpie_dst.examples import bank

FAULTS = ["process.crash=0.1", "network.partition=0.3", "network.delay=0.05"]


def _events(events: list[Event]) -> list[tuple[object, ...]]:
    return [(e.index, e.time_ns, e.node, e.kind, e.fields) for e in events]


@pytest.mark.parametrize("name", ["run.trace", "run.trace.gz"])
def test_a_saved_trace_loads_back_losslessly_with_the_runs_hash(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    result = kelpie_dst.run(bank.main, seed=0, faults=FAULTS, trace_file=path, record=True)
    recorded = kelpie_dst.run(bank.main, seed=0, faults=FAULTS, record=True)
    assert recorded.trace_hash == result.trace_hash
    loaded = load_trace(path)
    assert loaded.trace_hash == result.trace_hash
    assert len(loaded.events) == result.events > 50
    assert loaded.seed == 0 and loaded.outcome == "ok" and not loaded.truncated

    # Lossless: the same events, field for field, as the run kept in memory.
    async def grab(sim: kelpie_dst.Simulation) -> list[Event]:
        await bank.main(sim)
        return list(sim.trace.events)

    in_memory = kelpie_dst.run(grab, seed=0, faults=FAULTS, record=True).value
    assert isinstance(in_memory, list)
    assert _events(loaded.events[: len(in_memory)]) == _events(in_memory)
    assert _events(list(read_trace(path))) == _events(loaded.events)


def test_gzip_files_are_smaller_and_byte_for_byte_reproducible(tmp_path: Path) -> None:
    plain, packed, again = tmp_path / "a.trace", tmp_path / "a.trace.gz", tmp_path / "b.trace.gz"
    for path in (plain, packed):
        kelpie_dst.run(bank.main, seed=2, faults=FAULTS, trace_file=path)
    kelpie_dst.run(bank.main, seed=2, faults=FAULTS, trace_file=again)
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    # (3x, not more: the scheduling decisions, task numbers, compress less than text)
    assert packed.stat().st_size * 3 < plain.stat().st_size
    assert gzip.decompress(again.read_bytes()) == plain.read_bytes()
    assert packed.read_bytes()[4:8] == b"\0\0\0\0"  # no time stamp in the header


def test_a_trace_saved_in_a_fresh_process_matches_this_one(tmp_path: Path) -> None:
    path = tmp_path / "fresh.trace.gz"
    code = (
        "import sys, kelpie_dst\n"
        "from kelpie_dst.examples import bank\n"
        f"kelpie_dst.run(bank.main, seed=3, faults={FAULTS!r}, trace_file=sys.argv[1])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
    here = kelpie_dst.run(bank.main, seed=3, faults=FAULTS)
    assert load_trace(path).trace_hash == here.trace_hash


def test_open_simulation_saves_its_trace_when_closed(tmp_path: Path) -> None:
    path = tmp_path / "steps.trace.gz"
    with kelpie_dst.open_simulation(seed=4, trace_file=path) as handle:
        handle.advance(2)
        handle.step(trio.sleep, 1)
    loaded = load_trace(path)
    assert loaded.trace_hash == handle.trace_hash  # everything up to the teardown
    assert loaded.events[0].kind == "run.start" and loaded.outcome is None  # no run.end


def test_bad_trace_files_give_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cannot read trace file '.*missing.trace'"):
        load_trace(tmp_path / "missing.trace")
    empty = tmp_path / "empty.trace"
    empty.write_bytes(b"")
    with pytest.raises(UsageError, match="is empty"):
        load_trace(empty)
    junk = tmp_path / "junk.trace"
    junk.write_bytes(b"\x93\x01\x02\x03not a trace at all")
    with pytest.raises(UsageError, match=r"is not a kelpie_dst trace \(event 0"):
        load_trace(junk)
    broken = tmp_path / "broken.trace.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(UsageError, match="damaged gzip file"):
        load_trace(broken)
    with pytest.raises(UsageError, match="cannot write trace file"):
        kelpie_dst.run(bank.main, trace_file=tmp_path / "no" / "such" / "dir.trace")


def test_a_truncated_file_loads_its_complete_events(tmp_path: Path) -> None:
    whole = tmp_path / "whole.trace"
    result = kelpie_dst.run(bank.main, seed=1, trace_file=whole)
    cut = tmp_path / "cut.trace"
    cut.write_bytes(whole.read_bytes()[:-3])
    loaded = load_trace(cut)
    assert loaded.truncated and len(loaded.events) == result.events - 1


def test_first_divergence_keeps_the_equal_events_before_it() -> None:
    left = [Event(i, i, "n", "log", {"v": i}) for i in range(10)]
    right = [*left[:7], Event(7, 7, "n", "log", {"v": -7}), *left[8:]]
    divergence = first_divergence(left, right, context=3)
    assert divergence is not None and divergence.index == 7
    assert [e.index for e in divergence.before] == [4, 5, 6]
    assert divergence.changed_fields() == ["v: 7 != -7"]
    assert "the 3 equal events before it" in divergence.describe()
    plain = first_divergence(left, right)
    assert plain is not None and plain.before == ()
    assert "equal events" not in plain.describe()  # check-determinism's output is unchanged
