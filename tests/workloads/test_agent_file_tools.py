"""agent_file_tools: the file tools against a model. The scenario passes and repeats its trace,
its operations reach the edges (refusals, pages, evictions), and the model itself answers as
Letta's tools do in the cases the docs spell out."""

from __future__ import annotations

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._file_tools_model import MFile, Model


def test_the_scenario_passes_repeats_and_reaches_refusals_and_evictions() -> None:
    scenario = load_scenario("agent_file_tools", ["workload.params.ops=12"])
    first, again = run_scenario(scenario, 1), run_scenario(scenario, 1)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["file_tools.ops_checked"] == 12
    assert first.metrics["file_tools.open_calls"] > 0
    assert first.metrics["file_tools.errors"] > 0
    assert first.result.trace_hash == again.result.trace_hash


def _model() -> Model:
    model = Model(2, 60, [("notes", "")])
    for n, text in enumerate(["a\n\nb\nc\n", "one\ntwo\n", "x\ny\nz\n"]):
        model.add_file(MFile(f"file-{n}", "notes", f"f{n}.txt", float(n), text))
    model.attach("notes")
    return model


def test_attaching_opens_the_newest_files_up_to_the_limit_and_the_lru_closes_the_oldest() -> None:
    model = _model()
    assert [f.open for f in model.files] == [False, True, True]  # same moment: by id
    answer = model.open_files([{"file_name": "notes/f0.txt", "offset": 1, "length": 2}], False)
    assert answer.text == (
        "* Opened notes/f0.txt (lines 2-3)\n"
        "Note: Closed 1 least recently used file(s) due to open file limit: notes/f1.txt"
    )
    assert "[Viewing lines 2 to 3 (out of 3 lines)]\n2: b\n3: c" in model.directories()


def test_refusals_change_nothing() -> None:
    model = _model()
    before = model.directories()
    past = model.open_files([{"file_name": "notes/f1.txt", "offset": 2}], True)
    assert past.error and past.text.endswith(
        "File notes/f1.txt has only 2 lines, but requested offset 3 is out of range"
    )
    assert model.grep("(", None, None, None).error
    assert model.directories() == before


def test_grep_pages_and_counts_across_files() -> None:
    model = _model()
    answer = model.grep("[a-z]", "*.txt", 0, 7)
    assert answer.text.startswith("Found 8 total matches across 3 files (showing matches 8-8 of 8)")
    assert answer.text.endswith("=== notes/f2.txt:3 ===\n> 3: z\n\nNo more matches to show.")
