"""A complete trace (issue #14): the hash covers which task ran at each step, every timer armed
with its deadline, and the number of draws from each random stream."""

from __future__ import annotations

import hashlib
import io

import pytest
import trio

import kelpie_dst
from kelpie_dst._trace import SCHED, Trace, decode_trace, first_divergence
from kelpie_dst.examples import interleave

from . import sleeps_leak


def test_a_leak_that_changes_only_how_many_sleeps_run_is_caught() -> None:
    report = kelpie_dst.check_determinism(sleeps_leak.sleeps_leak, seed=1, runs=2)
    assert not report.deterministic
    assert report.divergence is not None
    # the events the program logs are equal; the scheduling decisions are not
    left, right = report.divergence.left, report.divergence.right
    assert left is not None and right is not None
    assert left.kind == right.kind == SCHED
    assert "kelpie_dst.node[main]" in report.divergence.detail  # the task that sleeps
    assert report.divergence.detail in report.describe()


def test_the_number_of_sleeps_changes_the_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    results = []
    for pieces in ("1", "2"):
        monkeypatch.setenv("KELPIE_TEST_PIECES", pieces)
        results.append(kelpie_dst.run(sleeps_leak.one_sleep_or_two, seed=4, record=True))
    one, two = results
    assert one.ok and two.ok and one.virtual_time == two.virtual_time == 1.0
    assert one.trace_hash != two.trace_hash


def test_timers_and_their_deadlines_are_traced() -> None:
    async def main() -> None:
        with trio.move_on_after(2.5):
            await trio.sleep(1)

    result = kelpie_dst.run(main, seed=1, record=True)
    sink = io.BytesIO()
    kelpie_dst.run(main, seed=1, trace_file=sink)
    timers = [
        t for e in decode_trace(sink.getvalue()) if e.kind == SCHED for t in e.fields["timers"]
    ]
    assert timers == [2.5, 1.0]
    assert result.ok


def test_an_extra_draw_from_the_global_random_module_changes_the_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = kelpie_dst.run(sleeps_leak.extra_draw, seed=2)
    monkeypatch.setenv("KELPIE_TEST_DRAW", "1")
    drawn = kelpie_dst.run(sleeps_leak.extra_draw, seed=2)
    assert plain.ok and drawn.ok
    assert plain.trace_hash != drawn.trace_hash


def test_the_order_in_which_tasks_run_is_in_the_hash() -> None:
    async def main() -> None:
        async def worker() -> None:
            for _ in range(3):
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(worker)

    # Nothing is logged, so before issue #14 every seed had the same hash.
    hashes = {kelpie_dst.run(main, seed=s).trace_hash for s in range(12)}
    assert len(hashes) > 6


def test_the_file_still_hashes_to_the_trace_hash_and_names_task_numbers() -> None:
    sink = io.BytesIO()
    result = kelpie_dst.run(interleave.main, seed=7, trace_file=sink, record=True)
    data = sink.getvalue()
    assert hashlib.blake2b(data, digest_size=16).hexdigest() == result.trace_hash
    events = list(decode_trace(data))
    assert result.events == len(events)
    spawned = {e.fields["n"] for e in events if e.kind == "task.spawn"}
    ran = {n for e in events if e.kind == SCHED for n in e.fields["ran"]}
    assert ran <= spawned and len(ran) > 50
    assert "ran=" in next(e for e in events if e.kind == SCHED).describe()


def test_sched_events_stay_out_of_the_tail_unless_recording() -> None:
    trace = Trace()
    trace.ran.extend([1, 2, 3])
    trace.emit(0.0, "-", "log", {"message": "x"})
    assert [e.kind for e in trace.tail] == ["log"]
    assert trace.count == 2  # the sched event still counts (and is hashed)
    recorded = Trace(record=True)
    recorded.ran.extend([1, 2, 3])
    recorded.emit(0.0, "-", "log", {"message": "x"})
    assert [e.kind for e in recorded.events] == [SCHED, "log"]
    assert recorded.hexdigest() == trace.hexdigest()


def test_reading_a_stepped_simulation_hash_does_not_change_it() -> None:
    def session(peek: bool) -> tuple[str, bytes]:
        sink = io.BytesIO()
        with kelpie_dst.open_simulation(seed=3, trace_file=sink) as handle:
            for _ in range(3):
                handle.advance(1)
                if peek:
                    handle.trace_hash  # noqa: B018
        return handle.trace_hash, sink.getvalue()  # after close: the teardown is included

    peeked, quiet = session(True), session(False)
    assert peeked == quiet
    final, data = quiet
    assert hashlib.blake2b(data, digest_size=16).hexdigest() == final


def test_a_divergence_in_scheduling_names_the_tasks() -> None:
    def events(seed: int) -> list[kelpie_dst._trace.Event]:
        sink = io.BytesIO()
        kelpie_dst.run(interleave.main, seed=seed, trace_file=sink)
        return list(decode_trace(sink.getvalue()))

    divergence = first_divergence(events(1), events(2))
    assert divergence is not None
    text = divergence.describe("seed 1", "seed 2")
    if divergence.left is not None and divergence.left.kind == SCHED:
        assert "interleave.main.<locals>." in divergence.detail
        assert divergence.detail in text
