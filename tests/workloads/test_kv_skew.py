"""The kv_write_skew scenario and its serializability checker: the scenario passes and repeats
its trace; the checker names write skew, lost updates, aborted reads and phantom writers, and
accepts what some serial order explains (including commits whose outcome the client never
learned)."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._kv_serial import INITIAL, Txn, check_serializable, parse_value


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("kv_write_skew", ["workload.params.ops=8"])
    first, again = run_scenario(scenario, 3), run_scenario(scenario, 3)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["txns.written"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


def _t(id: str, reads: dict[str, str], writes: dict[str, int], status: str = "ok") -> Txn:
    return Txn(id, "withdraw", dict(reads), dict(writes), status)


def test_a_serial_history_passes() -> None:
    t1 = _t("T1", {"x": INITIAL, "y": INITIAL}, {"x": 0})
    t2 = _t("T2", {"x": "T1", "y": INITIAL}, {"y": 1})
    audit = _t("T3", {"x": "T1", "y": "T2"}, {})
    assert check_serializable([t1, t2, audit], {"x": "T1", "y": "T2"}) == []


def test_write_skew_is_a_cycle() -> None:
    # both read the initial pair, each wrote a different counter: no serial order has that
    t1 = _t("T1", {"x": INITIAL, "y": INITIAL}, {"x": -1})
    t2 = _t("T2", {"x": INITIAL, "y": INITIAL}, {"y": -1})
    problems = check_serializable([t1, t2], {"x": "T1", "y": "T2"})
    assert len(problems) == 1 and "no serial order" in problems[0], problems
    assert "T1" in problems[0] and "T2" in problems[0]


def test_a_lost_update_is_named() -> None:
    t1 = _t("T1", {"x": INITIAL}, {"x": 3})
    t2 = _t("T2", {"x": INITIAL}, {"x": 4})
    problems = check_serializable([t1, t2], {"x": "T2"})
    assert any("lost update" in p and "T1" in p and "T2" in p for p in problems), problems


def test_reads_of_failed_or_unknown_writers() -> None:
    failed = _t("T1", {"x": INITIAL}, {"x": 1}, "fail")
    reader = _t("T2", {"x": "T1"}, {})
    assert any("aborted read" in p for p in check_serializable([failed, reader], {"x": "T1"}))
    phantom = _t("T3", {"x": "T9"}, {})
    assert any("no client wrote" in p for p in check_serializable([phantom], {"x": INITIAL}))
    # an unknown outcome that someone observed committed; one nobody observed did not
    unknown = _t("T1", {"x": INITIAL}, {"x": 1}, "unknown")
    lost = _t("T4", {"y": INITIAL}, {"y": 1}, "unknown")
    after = _t("T2", {"x": "T1"}, {"x": 2})
    assert check_serializable([unknown, lost, after], {"x": "T2", "y": INITIAL}) == []


def test_a_final_state_behind_a_committed_overwrite_is_named() -> None:
    t1 = _t("T1", {"x": INITIAL}, {"x": 1})
    t2 = _t("T2", {"x": "T1"}, {"x": 2})
    problems = check_serializable([t1, t2], {"x": "T1"})
    assert any("final version" in p for p in problems), problems


def test_values_name_their_writer() -> None:
    assert parse_value(None, 2) == (INITIAL, 2)
    assert parse_value(b"T3.4:-1", 2) == ("T3.4", -1)


def test_the_scans_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("kv_scans", ["workload.params.ops=8"])
    first, again = run_scenario(scenario, 3), run_scenario(scenario, 3)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["txns.written"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


def test_own_writes_a_scan_must_show_what_the_transaction_set_and_not_what_it_deleted() -> None:
    from kelpie_dst.workloads._kv_scans import OwnWrite, check_own_writes

    good = [OwnWrite("T1", "q0.flag", "set", True), OwnWrite("T2", "q0.flag", "deleted", False)]
    assert check_own_writes(good) == []
    bad = [
        OwnWrite("T3", "q1.flag", "deleted", True),
        OwnWrite("T4", "q1.flag", "set", False),
        *good,
    ]
    assert check_own_writes(bad) == [
        "T3 deleted q1.flag, then its own scan still listed it",
        "T4 set q1.flag, then its own scan did not list it",
    ]


def test_a_limited_reverse_scan_reads_the_pair_and_the_flag_flips() -> None:
    import trio

    from kelpie_dst.shims import SimKV
    from kelpie_dst.workloads._kv_scans import read_pair, toggle_flag

    async def main() -> None:
        kv = SimKV()
        async with kv.transaction() as tx:
            assert await read_pair(tx, 0, 2) == {"p0.x": (INITIAL, 2), "p0.y": (INITIAL, 2)}
            await tx.set(b"p0.y", b"T1:1")
            first = await toggle_flag(tx, 0, "T1")
        async with kv.transaction() as tx:
            assert await read_pair(tx, 0, 2) == {"p0.x": (INITIAL, 2), "p0.y": ("T1", 1)}
            second = await toggle_flag(tx, 0, "T2")
        assert (first.did, first.listed) == ("set", True)
        assert (second.did, second.listed) == ("deleted", False)

    trio.run(main)


def test_the_sqlite_scans_both_ways_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("kv_skew_sqlite", ["workload.params.ops=6"])
    first, again = run_scenario(scenario, 3), run_scenario(scenario, 3)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["txns.written"] >= 1
    assert first.result.trace_hash == again.result.trace_hash


def test_own_writes_a_get_must_find_what_the_transaction_set_and_nothing_it_deleted() -> None:
    from kelpie_dst.workloads._kv_scans import OwnWrite, check_own_writes

    good = [
        OwnWrite("T1", "q0.flag", "set", True, read_back=True, got="T1"),
        OwnWrite("T2", "q0.flag", "deleted", False, read_back=True, got=None),
        OwnWrite("T3", "q0.flag", "set", True),  # no read-back (scans = 1): not judged
    ]
    assert check_own_writes(good) == []
    bad = [
        OwnWrite("T4", "q1.flag", "deleted", False, read_back=True, got="T3"),
        OwnWrite("T5", "q1.flag", "set", True, read_back=True, got=None),
        *good,
    ]
    assert check_own_writes(bad) == [
        "T4 deleted q1.flag, then its own get found 'T3', not None",
        "T5 set q1.flag, then its own get found None, not 'T5'",
    ]


def test_a_limited_forward_scan_reads_the_pair_and_the_flag_reads_back() -> None:
    import trio

    from kelpie_dst.shims import SimKV
    from kelpie_dst.workloads._kv_scans import read_pair, toggle_flag

    async def main() -> None:
        kv = SimKV()
        async with kv.transaction() as tx:
            await tx.set(b"p0.x", b"T1:1")
            first = await toggle_flag(tx, 0, "T1", read_back=True)
        async with kv.transaction() as tx:
            pair = await read_pair(tx, 0, 2, forward=True)
            assert pair == {"p0.x": ("T1", 1), "p0.y": (INITIAL, 2)}
            second = await toggle_flag(tx, 0, "T2", read_back=True)
        assert (first.did, first.listed, first.got) == ("set", True, "T1")
        assert (second.did, second.listed, second.got) == ("deleted", False, None)

    trio.run(main)
