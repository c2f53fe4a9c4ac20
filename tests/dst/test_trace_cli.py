"""``kelpie-dst trace show|diff|html`` (the ``trace`` click group, invoked directly)."""

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import kelpie_dst
from kelpie_dst import UsageError
from kelpie_dst._trace import load_trace
from kelpie_dst._trace_cli import kind_matches, trace
from kelpie_dst._trace_html import decode_events, read_model
from kelpie_dst.examples import replication

FAULTS = ["process.crash=0.04", "network.partition=0.3", "network.delay=0.05"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("traces")
    paths = {}
    for name, seed in (("a", 4), ("a2", 4), ("b", 5)):
        paths[name] = tmp / f"{name}.trace.gz"
        kelpie_dst.run(replication.main, seed=seed, faults=FAULTS, trace_file=paths[name])
    return paths


def invoke(*args: object) -> click.testing.Result:
    return CliRunner().invoke(trace, [str(a) for a in args], catch_exceptions=True)


def test_kind_patterns_match_whole_dotted_parts() -> None:
    assert kind_matches("node.crash", ["node"]) and kind_matches("node.crash", ["node."])
    assert kind_matches("fault", ["fault"]) and not kind_matches("fault", ["fault."])
    assert kind_matches("fault.heal_all", ["fault"]) and not kind_matches("nodes.x", ["node"])


def test_show_lists_events_in_the_documented_format(traces: dict[str, Path]) -> None:
    result = invoke("show", traces["a"], "--limit", 3)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("#0 t=0.000000000s node=- run.start faults=[")
    assert len(lines) == 3
    assert "-- 3 of " in result.stderr and "seed=4, outcome=ok" in result.stderr


def test_show_filters_by_node_kind_and_time(traces: dict[str, Path]) -> None:
    events = load_trace(traces["a"]).events
    crashed = next(e.fields["node"] for e in events if e.kind == "node.crash")
    result = invoke("show", traces["a"], "--node", crashed, "--kind", "node", "--kind", "fault")
    lines = result.stdout.splitlines()
    expected = [
        e.describe()
        for e in events
        if (e.kind.startswith("node.") or e.kind == "fault")
        and crashed in (e.node, e.fields.get("node"), e.fields.get("target"))
    ]
    assert lines == expected and any("node.crash" in line for line in lines)
    assert any(" node=- " in line for line in lines)  # emitted by the nemesis, about the node
    window = invoke("show", traces["a"], "--from", "5s", "--to", "6", "--kind", "repl.send")
    times = [float(line.split()[1][2:-1]) for line in window.stdout.splitlines()]
    assert times and all(5 <= t <= 6 for t in times)
    assert all(" repl.send " in line for line in window.stdout.splitlines())


def test_diff_of_equal_traces_exits_0(traces: dict[str, Path]) -> None:
    result = invoke("diff", traces["a"], traces["a2"])
    assert result.exit_code == 0
    assert result.stdout.startswith("identical: ")


def test_diff_names_the_first_divergent_event_with_context(traces: dict[str, Path]) -> None:
    result = invoke("diff", traces["a"], traces["b"], "--context", 4)
    assert result.exit_code == 1
    out = result.stdout
    assert out.startswith("traces differ at event #0 ")  # run.start carries the seed
    assert "fields that differ: seed: 4 != 5" in out
    assert "summary:" in out and "equal prefix: 0 events" in out
    assert "kinds whose counts differ:" in out


def test_diff_of_a_prefix_shows_where_one_trace_ended(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    data = load_trace(traces["a"])
    raw = tmp_path / "prefix.trace"
    kelpie_dst.run(replication.main, seed=4, faults=FAULTS, trace_file=raw)
    cut = tmp_path / "cut.trace"
    cut.write_bytes(raw.read_bytes()[: len(raw.read_bytes()) // 2])
    result = invoke("diff", traces["a"], cut, "--context", 2)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    index = len(load_trace(cut).events)
    assert lines[0].startswith(f"traces differ at event #{index} ")
    assert lines[1] == "  last 2 equal events:"
    assert lines[4].startswith("  A:  #") and lines[5] == "  B:  <trace ended>"
    assert f"equal prefix: {index} events" in result.stdout
    assert len(data.events) > index


def test_html_writes_a_page_holding_the_whole_trace(traces: dict[str, Path]) -> None:
    out = traces["a"].with_name("page.html")
    result = invoke("html", traces["a"], "-o", out)
    assert result.exit_code == 0 and result.stdout.startswith(f"wrote {out}: ")
    model = read_model(out.read_text(encoding="utf-8"))
    assert [(e.time_ns, e.node, e.kind, e.fields) for e in decode_events(model)] == [
        (e.time_ns, e.node, e.kind, e.fields) for e in load_trace(traces["a"]).events
    ]
    default = invoke("html", traces["b"])
    assert default.exit_code == 0 and traces["b"].with_name("b.html").exists()


def test_bad_arguments_are_usage_errors(traces: dict[str, Path], tmp_path: Path) -> None:
    missing = invoke("show", tmp_path / "nope.trace")
    assert isinstance(missing.exception, UsageError)
    assert "cannot read trace file" in str(missing.exception)
    bad_time = invoke("show", traces["a"], "--from", "soon")
    assert isinstance(bad_time.exception, UsageError) and "--from" in str(bad_time.exception)
    unwritable = invoke("html", traces["a"], "-o", tmp_path / "no" / "dir" / "x.html")
    assert isinstance(unwritable.exception, UsageError)
    assert invoke("show").exit_code == 2  # click's own usage error: FILE is missing


def test_check_determinism_keeps_the_traces_for_trace_diff(tmp_path: Path) -> None:
    report = kelpie_dst.check_determinism(
        "kelpie_dst.examples.setorder:main", seed=4, runs=2, save_traces=tmp_path
    )
    assert not report.deterministic and report.divergence is not None
    first, second = tmp_path / "run1.trace", tmp_path / "run2.trace"
    assert [load_trace(p).trace_hash for p in (first, second)] == [h for _, h in report.runs]
    result = invoke("diff", first, second)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"traces differ at event #{report.divergence.index} ")
