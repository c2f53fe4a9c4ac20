"""The ``sandbox_port`` scenario: the sandbox port driven directly, judged by a model of its
working area and by each command's running time. The scenario passes and repeats its trace;
the checks name hand-made bad records."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._sandbox_port_checks import (
    Seen,
    Timed,
    check_seen,
    check_timed,
    running_time,
)
from kelpie_dst.workloads.sandbox_port import Tree


def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("sandbox_port")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["sandbox.observations"] > 50
    assert first.metrics["sandbox.pauses"] > 0
    assert first.metrics["users.done"] == 3
    assert first.result.trace_hash == again.result.trace_hash


def test_seen_names_an_answer_the_contract_does_not_allow() -> None:
    good = Seen("u0", "write_file('f', 96 bytes)", "written", ("written",))
    either = Seen("u0", "the working area after a timeout", 2, (1, 2))
    bad = Seen("u1", "write_file('f', 96 bytes)", "refused", ("written",))
    assert check_seen([good, either]) == []
    (problem,) = check_seen([good, bad])
    assert problem.startswith("u1: write_file('f', 96 bytes): got 'refused', not 'written'")


def _timed(outcome: str, start: float, end: float, *paused: tuple[float, float]) -> Timed:
    return Timed("u0", "sleep 2", 1.0, 2.0, start, end, tuple(paused), outcome)


def test_a_timeout_counts_running_time_only() -> None:
    # paused 0.5 s in the middle: killed 1.5 s after it started, having run its 1 s
    kept = _timed("timeout", 10.0, 11.5, (10.2, 10.7))
    assert running_time(kept) == 1.0
    assert check_timed([kept]) == []
    # resumed with its whole timeout again: killed 0.2 s late
    late = _timed("timeout", 10.0, 11.7, (10.2, 10.7))
    (problem,) = check_timed([late])
    assert "timed out after running 1.200000s (1 pause(s)), not at its timeout" in problem
    # the pause counted: killed 0.5 s early
    assert check_timed([_timed("timeout", 10.0, 11.0, (10.2, 10.7))])


def test_a_command_that_finished_kept_its_timeout_and_its_work() -> None:
    finished = Timed("u0", "sleep 0.3", 1.0, 0.3, 5.0, 5.31, (), "ok")
    assert check_timed([finished]) == []
    hung = Timed("u0", "sleep 2", 1.0, 2.0, 5.0, 7.01, (), "ok")
    assert "past its timeout" in check_timed([hung])[0]
    early = Timed("u0", "sleep 2", 5.0, 2.0, 5.0, 6.0, (), "ok")
    assert "before its 2s of sleep" in check_timed([early])[0]
    assert check_timed([Timed("u0", "x", 1.0, 0.0, 0.0, 9.0, (), "crash")]) == []


def test_the_model_removes_a_directory_and_nothing_beside_it() -> None:
    tree = Tree({"d/a": b"1", "d.txt": b"2", "d2/a": b"3"}, {"d", "d2"})
    tree.remove("d")
    assert tree.files == {"d.txt": b"2", "d2/a": b"3"}
    assert tree.dirs == {"d2"}
    assert tree.listing("") == ["d.txt", "d2/"]
