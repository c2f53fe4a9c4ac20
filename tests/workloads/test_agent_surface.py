"""agent_api_surface: the REST surface no other scenario drives (standalone block updates and
deletes, steps' feedback and filters, a folder's and an agent's files in pages, streams with
include_return_message_types, agent files, the error contract) through the SDK under faults.
The scenario passes and repeats its trace; the oracle names hand-made bad histories."""

from __future__ import annotations

import attrs
import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_surface_checks import (
    BlockState,
    ErrorSeen,
    FileSeen,
    FolderState,
    PageWalk,
    StepSeen,
    StreamSeen,
    SurfaceLog,
    check_surface,
    want_steps,
)

SMALL = ["workload.params.agents=1", "workload.params.messages=1", "duration=30s"]


@pytest.mark.slow  # two runs of about 4 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_api_surface", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["surface.requests"] > 50
    assert first.metrics["surface.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _block(**changes: object) -> BlockState:
    fields = {"label": "Surf-0", "value": "v", "limit": 200, "description": "d"}
    fields.update({"read_only": False, "metadata": {"k": 1}})
    fields.update(changes)
    return BlockState.of(fields)


def _log() -> SurfaceLog:
    """A consistent history: three steps (two rated), five files (two closed), two streams,
    every error as the contract says."""
    log = SurfaceLog()
    log.block_updates = [
        ("update 1", _block(value=""), _block(value="")),
        ("update 2", _block(value="", read_only=True), _block(value="", read_only=True)),
    ]
    log.deleted_block = "block-gone"
    log.deleted_reads = [("blocks.list", False), ("agents.retrieve(agent-s)", False)]
    log.steps_ref = [
        StepSeen("step-1", "negative", ("surf-a",)),
        StepSeen("step-2", "positive", ("surf-b",)),
        StepSeen("step-3", None, ()),
    ]
    log.steps_model = {s.id: (s.feedback, s.tags) for s in log.steps_ref}
    log.steps_read = log.steps_ref[:2]
    for params in (
        (("has_feedback", True),),
        (("has_feedback", False),),
        (("feedback", "positive"),),
        (("tags", ("surf-a",)),),
    ):
        for order in ("asc", "desc"):
            walk = PageWalk("steps", params, order, 1, ())
            log.step_walks.append(attrs.evolve(walk, got=tuple(want_steps(log, walk))))
    names = ["e-note.txt", "d-note.txt", "c-note.txt", "b-note.txt", "a-note.txt"]
    log.files_ref = [FileSeen(f"file-{i}", n, 100.0 + i) for i, n in enumerate(names)]
    log.uploaded = [f.id for f in log.files_ref]
    log.closed = log.uploaded[:2]
    log.open_ref = {f: f not in log.closed for f in log.uploaded}
    ids = tuple(log.uploaded)
    log.file_walks = [
        PageWalk("folders.files", (), "asc", 2, ids),
        PageWalk("folders.files", (), "desc", 1, ids[::-1]),
        PageWalk("agents.files", (("is_open", True),), "asc", 2, ids[2:]),
        PageWalk("agents.files", (("is_open", False),), "desc", 1, ids[1::-1]),
    ]
    frames = ("assistant_message", "stop_reason", "usage_statistics")
    log.streams = [StreamSeen("stream 0", ("assistant_message",), frames)]
    log.errors = [
        ErrorSeen("blocks.create(label='bad label!')", 422, 422, "false"),
        ErrorSeen("blocks.retrieve(unknown id)", 404, 404, "false"),
        ErrorSeen("DELETE /v1/blocks/", 405, 405, "false", "GET, POST"),
    ]
    folder = FolderState.of({"name": "docs", "description": "", "metadata": {}})
    log.folder_updates = [("folder update 1", folder, folder)]
    log.folder_name = ("source-1", "docs")
    log.named_folders = [("docs", ("source-1",))]
    return log


def test_a_consistent_history_passes_and_the_model_filters_as_documented() -> None:
    log = _log()
    assert check_surface(log) == []
    by = {(w.params, w.order): w.got for w in log.step_walks}
    assert by[((("has_feedback", False),), "asc")] == ("step-3",)
    assert by[((("has_feedback", True),), "desc")] == ("step-2", "step-1")
    assert by[((("tags", ("surf-a",)),), "asc")] == ("step-1",)


def test_an_update_that_skips_a_falsy_field_and_a_delete_left_behind_are_named() -> None:
    log = _log()
    log.block_updates.append(("update 3", _block(value="v"), _block(value="")))
    log.deleted_reads.append(("agents.blocks.list(agent-s)", True))
    problems = check_surface(log)
    assert len(problems) == 2, problems
    assert problems[0] == "update 3: value='v' (want '')"
    assert problems[1] == "deleted, but agents.blocks.list(agent-s) shows it"


def test_lost_step_tags_and_a_filter_ignoring_false_are_named() -> None:
    log = _log()
    log.steps_read[0] = attrs.evolve(log.steps_read[0], tags=())
    walk = next(w for w in log.step_walks if w.params == (("has_feedback", False),))
    log.step_walks[log.step_walks.index(walk)] = attrs.evolve(
        walk, got=("step-1", "step-2", "step-3")
    )
    problems = check_surface(log)
    assert len(problems) == 2, problems
    assert problems[0].startswith("step step-1: feedback 'negative', tags []; want 'negative'")
    assert problems[1].startswith("steps (has_feedback=False; asc, pages of 1): got")


def test_files_out_of_upload_order_and_a_short_walk_are_named() -> None:
    log = _log()
    log.files_ref = sorted(log.files_ref, key=lambda f: f.name)  # by name, not by time
    log.file_walks[0] = attrs.evolve(log.file_walks[0], got=tuple(log.uploaded[:2]))
    log.open_ref[log.closed[0]] = True
    problems = check_surface(log)
    assert any("are not by upload time" in p for p in problems), problems
    assert any(p.startswith("folders.files (no filter; asc, pages of 2): got") for p in problems)
    assert any("was closed, but the agent's files show it open" in p for p in problems)


def test_a_stream_without_its_stop_reason_or_with_unasked_types_is_named() -> None:
    log = _log()
    log.streams = [
        StreamSeen("stream 1", ("assistant_message",), ("assistant_message",)),
        StreamSeen(
            "stream 2",
            ("assistant_message",),
            ("reasoning_message", "assistant_message", "stop_reason", "usage_statistics"),
        ),
    ]
    problems = check_surface(log)
    assert len(problems) == 2, problems
    assert problems[0].startswith("stream 1: the finished stream does not end with stop_reason")
    assert problems[1] == "stream 2: asked for ['assistant_message'], got ['reasoning_message'] too"


def test_a_wrong_status_a_missing_retry_header_or_a_wrong_allow_is_named() -> None:
    log = _log()
    log.errors = [
        ErrorSeen("bad label", 422, 400, "false"),
        ErrorSeen("unknown id", 404, 404, None),
        ErrorSeen("DELETE /v1/blocks/", 405, 405, "false", "DELETE, GET, POST"),
    ]
    problems = check_surface(log)
    assert problems == [
        "bad label: answered 400, the contract says 422",
        "unknown id: x-should-retry is None, the contract says 'false' (letta-client would "
        "resend it)",
        "DELETE /v1/blocks/: Allow is 'DELETE, GET, POST', want the path's GET, POST",
    ]


def test_a_folder_update_that_clears_an_omitted_field_or_a_stale_name_index_is_named() -> None:
    log = _log()
    want = FolderState.of({"name": "docs", "description": "notes", "metadata": {"k": 1}})
    seen = FolderState.of({"name": "docs", "description": "notes"})
    log.folder_updates.append(("folder update 2", seen, want))
    log.named_folders = [("docs", ())]
    problems = check_surface(log)
    assert len(problems) == 2, problems
    assert problems[0].startswith("folder update 2: FolderState(")
    assert problems[1] == "folders.list(name='docs'): got [], want ['source-1']"


def test_a_run_cancelled_or_lost_by_a_client_that_left_its_stream_is_named() -> None:
    log = _log()
    log.left_runs = [
        ("run-1", "completed", "end_turn", 2),  # fine
        ("run-2", "failed", "error", 0),  # not judged here (runs_end_cleanly is)
        ("run-3", "cancelled", "cancelled", 1),
        ("run-4", "completed", "end_turn", 0),
    ]
    problems = check_surface(log)
    assert [p.split(",")[0] for p in problems] == ["run run-3", "run run-4"], problems
    assert problems[0].endswith("a disconnect stops the stream, not the run")


def test_a_step_listing_another_steps_message_or_folders_out_of_order_are_named() -> None:
    log = _log()
    log.step_history = [
        ("m-1", "user_message", None),
        ("m-2", "assistant_message", "step-1"),
        ("m-3", "assistant_message", "step-2"),
    ]
    log.step_messages = {"step-1": (("m-2", "assistant_message"),)}
    assert check_surface(log) == []
    log.step_messages["step-2"] = (("m-2", "assistant_message"),)
    log.folders_ref = [FileSeen("source-b", "b", 2.0), FileSeen("source-a", "a", 1.0)]
    log.folder_walks = [PageWalk("folders", (), "desc", 1, ("source-b", "source-a"))]
    problems = check_surface(log)
    assert len(problems) == 3, problems
    assert problems[0].startswith("steps.messages.list(step-2): [('m-2', 'assistant_message')]")
    assert problems[1].startswith("the folders (asc) are not by creation")
    assert problems[2].startswith("folders (no filter; desc, pages of 1): got")
