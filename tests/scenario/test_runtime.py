"""Running a scenario seed: determinism, the liveness phase, invariants, failure classes."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

from kelpie_dst import FailureKind
from kelpie_dst._trace import decode_trace
from kelpie_dst.scenario import Scenario, load_scenario, run_scenario


def scenario(tmp_path: Path, body: str) -> Scenario:
    path = tmp_path / "s.toml"
    path.write_text(textwrap.dedent(body))
    return load_scenario(path)


def test_same_seed_same_run_and_seeds_differ() -> None:
    s = load_scenario("kv_linearizability", ["workload.params.ops=5"])
    a, b = run_scenario(s, 11), run_scenario(s, 11)
    assert a.result.trace_hash == b.result.trace_hash and a.metrics == b.metrics
    assert a.ok and a.swarm_faults == b.swarm_faults
    assert run_scenario(s, 12).result.trace_hash != a.result.trace_hash


def test_faults_heal_at_heal_at_and_the_workload_then_finishes(tmp_path: Path) -> None:
    s = scenario(
        tmp_path,
        """
        duration = "1m"
        [workload]
        entry = "tests.scenario.workloads:sleepy"
        params = { sleep = 30, steps = 3 }
        [faults.process]
        pause = 0.5
        [liveness]
        heal_at = "15s"
        within = "1m"
        """,
    )
    sink = io.BytesIO()
    run = run_scenario(s, 1, trace_file=sink)
    assert run.ok, run.result.failure
    assert run.metrics == {"steps": 3, "healed_steps": 2}  # steps at 10s, 20s, 30s
    events = list(decode_trace(sink.getvalue()))
    [heal] = [e for e in events if e.kind == "fault.heal_all"]
    assert heal.time == 15.0
    faults = [e.index for e in events if e.kind == "fault"]
    assert faults and max(faults) < heal.index  # nothing fires once healed


def test_liveness_violation_names_the_bound(tmp_path: Path) -> None:
    s = scenario(
        tmp_path,
        """
        duration = "10s"
        [workload]
        entry = "tests.scenario.workloads:sleepy"
        params = { sleep = 100, steps = 1 }
        [liveness]
        heal_at = "5s"
        within = "10s"
        """,
    )
    run = run_scenario(s, 1)
    failure = run.result.failure
    assert failure is not None and failure.kind is FailureKind.LIVENESS
    assert failure.message == (
        "liveness: the workload did not finish within 10s after every fault healed at t=5s"
    )
    assert "workloads.py" in failure.details and run.result.virtual_time == 15.0
    no_liveness = scenario(
        tmp_path,
        '[workload]\nentry = "tests.scenario.workloads:sleepy"\nparams = { sleep = 100 }\n',
    )
    failure = run_scenario(no_liveness, 1).result.failure
    assert failure is not None
    assert failure.message == "the workload did not finish within the scenario's duration of 1m"


def test_invariants_from_the_module_and_builtin(tmp_path: Path) -> None:
    body = """
        invariants = ["value_is_small", "always_true", "linearizability"]
        [workload]
        entry = "tests.scenario.workloads:stores"
        params = { value = VALUE }
        """
    ok = run_scenario(scenario(tmp_path, body.replace("VALUE", "3")), 0)
    assert ok.ok and ok.metrics["history.operations"] == 2
    big = run_scenario(scenario(tmp_path, body.replace("VALUE", "11")), 0).result.failure
    assert big is not None and big.kind is FailureKind.INVARIANT
    assert big.message == (
        "AssertionError: invariant value_is_small does not hold: value [bold]11[/] is too big"
    )
    assert "workloads.py" in big.details and "_runtime.py" not in big.details
    stale = scenario(tmp_path, body.replace("VALUE", "13").replace('"value_is_small", ', ""))
    failure = run_scenario(stale, 0).result.failure
    assert failure is not None and failure.kind is FailureKind.INVARIANT
    assert "NOT linearizable" in failure.message


def test_a_crash_and_a_plain_entry(tmp_path: Path) -> None:
    crash = scenario(tmp_path, '[workload]\nentry = "tests.scenario.workloads:crashes"\n')
    failure = run_scenario(crash, 4).result.failure
    assert failure is not None and failure.kind is FailureKind.CRASH
    assert failure.message == "KeyError: 'boom'"
    plain = scenario(tmp_path, '[workload]\nentry = "kelpie_dst.examples.interleave:main"\n')
    assert run_scenario(plain, 4).ok


def test_the_trace_file_gets_the_events() -> None:
    s = load_scenario("kv_linearizability", ["workload.params.ops=3"])
    sink = io.BytesIO()
    run = run_scenario(s, 2, trace_file=sink)
    events = list(decode_trace(sink.getvalue()))
    assert len(events) == run.result.events and events[-1].kind == "run.end"
