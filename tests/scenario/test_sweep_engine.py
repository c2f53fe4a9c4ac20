"""Sweep planning (sharding), running (fail-fast, time budget) and the seed corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from kelpie_dst import UsageError
from kelpie_dst.scenario._corpus import read_corpus
from kelpie_dst.scenario._sweep import parse_shard, plan, run_items

ROOT = Path(__file__).resolve().parents[2]
LOST_UPDATE = str(ROOT / "tests/quality/scenarios/lost_update.toml")


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_partition_the_sweep(n: int) -> None:
    work = [("a", (), range(10, 23)), ("b", ("x=1",), range(5)), ("c", (), [99])]
    everything = plan(work)
    assert [i.index for i in everything] == list(range(19))
    shards = [plan(work, (k, n)) for k in range(1, n + 1)]
    seen = [(i.ref, i.seed) for shard in shards for i in shard]
    assert sorted(seen) == sorted((i.ref, i.seed) for i in everything)
    assert len(seen) == len(set(seen))
    assert max(len(s) for s in shards) - min(len(s) for s in shards) <= 1


def test_parse_shard() -> None:
    assert parse_shard("2/5") == (2, 5)
    for bad in ("0/2", "3/2", "1", "a/b", "1/0"):
        with pytest.raises(UsageError):
            parse_shard(bad)


def test_fail_fast_stops_at_the_first_failure_and_budget_stops_early() -> None:
    items = plan([(LOST_UPDATE, (), range(10))])
    full = run_items(items)
    first = next(r.seed for r in full.results if not r.ok)
    fast = run_items(items, fail_fast=True)
    assert fast.stopped == "fail-fast" and fast.results[-1].seed == first
    assert fast.results == full.results[: first + 1]
    assert fast.exit_code == 1 == full.exit_code
    seen = []
    stopped = run_items(items, time_budget=1e-9, on_result=seen.append)
    assert stopped.stopped == "time budget" and stopped.results == () and seen == []


def test_corpus_files(tmp_path: Path) -> None:
    (tmp_path / "kv_linearizability.txt").write_text(
        "# header\n\n12  # a note\n7 workload.params.ops=3 duration=30s  # with overrides\n"
    )
    entries = read_corpus(tmp_path)
    assert [(e.scenario, e.seed, e.overrides, e.note, e.line) for e in entries] == [
        ("kv_linearizability", 12, (), "a note", 3),
        ("kv_linearizability", 7, ("workload.params.ops=3", "duration=30s"), "with overrides", 4),
    ]
    (tmp_path / "bad.txt").write_text("x12  # not a seed\n")
    with pytest.raises(UsageError, match=r"bad.txt:1: expected 'SEED  # note'"):
        read_corpus(tmp_path)


def test_the_shipped_corpus_parses_and_names_real_scenarios() -> None:
    entries = read_corpus(ROOT / "seeds")
    assert len(entries) >= 10
    assert {e.scenario for e in entries} >= {"kv_linearizability", "bank", "http_echo"}
