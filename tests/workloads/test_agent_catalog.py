"""agent_catalog: the shared catalog (archives, a folder's and a block's agents, scheduled
messages, the tool search), agent files the client writes, and full-text message search,
through the SDK under faults. The scenario passes and repeats its trace; the oracle names
hand-made bad histories."""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_catalog_checks import (
    LETTA_BLOCK_LIMIT,
    CatalogLog,
    ScheduleWalk,
    SearchSeen,
    check_catalog,
    fts_share,
)
from kelpie_dst.workloads._agent_lists import Walk

SMALL = ["workload.params.agents=1", "workload.params.messages=1", "duration=30s"]


@pytest.mark.slow  # two runs of a few seconds each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_catalog", SMALL)
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["catalog.walks"] >= 3
    assert first.metrics["catalog.round_trips"] == 1
    assert first.metrics["catalog.problems"] == 0
    # catalog_defaults (on in the scenario): a search with no limit and twelve schedules too
    assert first.metrics["catalog.searches"] == 3
    assert first.metrics["catalog.schedules"] == 12
    assert first.result.trace_hash == again.result.trace_hash


def test_catalog_defaults_without_the_catalog_is_one_line() -> None:
    base = load_scenario("agent_catalog", SMALL)
    params = {**base.workload.params, "catalog": False}
    run = run_scenario(attrs.evolve(base, workload=attrs.evolve(base.workload, params=params)), 0)
    assert run.result.failure is not None
    assert "workload.params.catalog_defaults: needs catalog = true" in run.result.failure.describe()


def _document(start: int = 3, approval: bool = True) -> dict[str, Any]:
    return {
        "agents": [
            {
                "id": "agent-0",
                "name": "src",
                "agent_type": "letta_v1_agent",
                "tags": ["cat"],
                "tool_rules": [{"type": "run_first", "tool_name": "cat_probe"}],
                "block_ids": ["block-0"],
                "tool_ids": ["tool-0"],
                "source_ids": ["source-0"],
                "files_agents": [
                    {"file_id": "file-0", "is_open": True, "start_line": start, "end_line": 7}
                ],
                "messages": [
                    {"role": "system", "content": [{"type": "text", "text": "sys"}]},
                    {"role": "user", "content": [{"type": "text", "text": "hello reef"}]},
                ],
            }
        ],
        "blocks": [
            {
                "id": "block-0",
                "label": "human",
                "value": "v",
                "limit": 300,
                "description": "d",
                "read_only": True,
                "metadata": {"k": 1},
            }
        ],
        "tools": [
            {
                "id": "tool-0",
                "name": "cat_probe",
                "tool_type": "custom",
                "source_code": "def cat_probe(): ...",
                "tags": ["cat"],
                "return_char_limit": 777,
                "default_requires_approval": approval,
            }
        ],
        "sources": [{"id": "source-0", "name": "docs", "description": "x"}],
        "files": [
            {
                "id": "file-0",
                "source_id": "source-0",
                "file_name": "t.txt",
                "content": "a\nb",
                "processing_status": "completed",
            }
        ],
    }


def _exported(document: dict[str, Any], name: str = "copy") -> dict[str, Any]:
    out = copy.deepcopy(document)
    out["agents"][0]["name"] = name
    out["sources"][0]["name"] = "docs_(1)"
    out["tools"].append({"id": "tool-1", "name": "open_files", "tool_type": "letta_files_core"})
    out["agents"][0]["tool_ids"].append("tool-1")
    out["agents"][0]["messages"][0]["content"][0]["text"] = "the copy's own system message"
    return out


def _walk(order: str, cursor: str, ids: tuple[str, ...], size: int = 1) -> Walk:
    return Walk(order, cursor, size, ids, size)


def _log() -> CatalogLog:
    """A consistent history."""
    log = CatalogLog()
    log.block_limits = [("blocks.create", LETTA_BLOCK_LIMIT)]
    ref = ("archive-a", "archive-b", "archive-c")
    log.references["archives"] = ref
    log.references_desc["archives"] = ref[::-1]
    log.stamps["archives"] = ((1.0, "archive-a"), (2.0, "archive-b"), (2.0, "archive-c"))
    log.walks.append(
        (
            "archives",
            [
                _walk("asc", "after", ref),
                _walk("desc", "after", ref[::-1]),
                _walk("asc", "before", ref),
                _walk("desc", "before", ref[::-1]),
            ],
        )
    )
    log.members.append(("archives.list(agent_id=x)", ("archive-a", "archive-c"), ref[::2]))
    log.contains.append(("tools.list(search='AT_PRO')", ("tool-1", "tool-2"), "tool-2"))
    log.schedules_made = ("s-1", "s-2", "s-3")
    log.schedules_ref = ("s-1", "s-2", "s-3")
    log.schedule_walks.append(ScheduleWalk(2, ((("s-1", "s-2"), True), (("s-3",), False))))
    log.schedule_walks.append(ScheduleWalk(3, ((("s-1", "s-2", "s-3"), False),)))
    document = _document()
    log.round_trips.append(("import then export", document, _exported(document), "copy"))
    written = (
        ("m-1", "the pelican and a lagoon"),
        ("m-2", "driftwood"),
        ("m-3", "pelican lagoon driftwood"),
        ("m-4", "nothing at all"),
    )
    log.searches.append(
        SearchSeen(
            "pelican lagoon driftwood",
            10,
            (written[2], written[0], written[1]),
            written,
        )
    )
    log.searches.append(
        SearchSeen("pelican lagoon driftwood", 2, (written[2], written[0]), written)
    )
    return log


def test_a_consistent_history_passes() -> None:
    assert check_catalog(_log()) == []


def test_a_block_default_limit_other_than_lettas_is_named() -> None:
    log = _log()
    log.block_limits.append(("memory_blocks persona", 5_000))
    [problem] = check_catalog(log)
    assert "5000" in problem and "20000" in problem


def test_walks_that_repeat_the_cursor_or_ignore_the_order_are_named() -> None:
    log = _log()
    ref = log.references["archives"]
    log.walks.append(("archives", [_walk("asc", "after", (ref[0], ref[0], ref[1], ref[1]))]))
    log.references_desc["archives"] = ref  # order=desc ignored
    problems = check_catalog(log)
    assert any("newest first" in p for p in problems)
    assert any("read asc by 'after'" in p for p in problems)


def test_a_listing_out_of_created_at_order_is_named() -> None:
    log = _log()
    log.stamps["archives"] = ((2.0, "archive-a"), (1.0, "archive-b"))
    assert any("not sorted" in p for p in check_catalog(log))


def test_filters_that_keep_too_much_or_miss_are_named() -> None:
    log = _log()
    log.members.append(("folders.agents.list(f)", ("agent-1",), ("agent-1", "agent-2")))
    log.contains.append(("tools.list(search='probe')", ("tool-1",), "tool-2"))
    problems = check_catalog(log)
    assert any("misses ['agent-2']" in p for p in problems)
    assert any("does not list tool-2" in p for p in problems)


def test_schedule_pages_with_a_wrong_has_next_page_are_named() -> None:
    log = _log()
    log.schedule_walks.append(ScheduleWalk(3, ((("s-1", "s-2", "s-3"), True), ((), False))))
    [problem] = check_catalog(log)
    assert "has_next_page=True" in problem
    log = _log()
    log.schedule_walks.append(ScheduleWalk(2, ((("s-1", "s-2"), False),)))
    problems = check_catalog(log)
    assert any("has_next_page=False" in p for p in problems)
    assert any("want the unpaged list" in p for p in problems)
    log = _log()
    log.schedules_ref = ("s-1", "s-2", "s-3", "s-3")
    assert any("listed 2 times" in p for p in check_catalog(log))


@pytest.mark.parametrize(
    ("change", "part"),
    [
        (lambda d: d["agents"][0]["files_agents"][0].update(start_line=2), "open"),
        (lambda d: d["tools"][0].update(default_requires_approval=False), "tools"),
        (lambda d: d["blocks"][0].update(read_only=False), "blocks"),
        (lambda d: d["agents"][0].update(tool_rules=[]), "rules"),
        (lambda d: d["agents"][0]["messages"].pop(), "history"),
        (lambda d: d["files"][0].update(content=""), "files"),
    ],
)
def test_an_export_that_lost_what_the_file_held_is_named(change: Any, part: str) -> None:
    log = _log()
    document = _document()
    exported = _exported(document)
    change(exported)
    log.round_trips = [("import then export", document, exported, "copy")]
    [problem] = check_catalog(log)
    assert f": {part} " in problem


def test_an_import_cut_before_its_folders_is_judged_on_what_the_create_commits() -> None:
    log = _log()
    document = _document()
    exported = _exported(document)
    exported["agents"][0]["source_ids"] = []
    exported["agents"][0]["files_agents"] = []
    log.round_trips = [("import then export", document, exported, "copy")]
    assert len(check_catalog(log)) == 3  # folders, files, open: the import was answered
    log.unsure.append("import then export")
    assert check_catalog(log) == []
    exported["blocks"][0]["read_only"] = False  # committed with the agent: still judged
    [problem] = check_catalog(log)
    assert ": blocks " in problem


def test_an_export_under_another_name_or_with_other_tools_is_named() -> None:
    log = _log()
    document = _document()
    exported = _exported(document, name="src_copy")
    exported["tools"].append({"id": "tool-9", "name": "extra", "tool_type": "custom"})
    exported["agents"][0]["tool_ids"].append("tool-9")
    log.round_trips = [("import then export", document, exported, "copy")]
    problems = check_catalog(log)
    assert any("named 'src_copy'" in p for p in problems)
    assert any("tools ['extra']" in p for p in problems)


def test_fts_hits_ranked_ascending_cut_or_missing_are_named() -> None:
    assert fts_share("pelican lagoon", "a pelican") == 0.5
    log = _log()
    [good, cut] = log.searches
    log.searches = [SearchSeen(good.query, good.limit, good.hits[::-1], good.written)]
    assert any("want share first" in p for p in check_catalog(log))
    log.searches = [SearchSeen(good.query, good.limit, good.hits[:2], good.written)]
    assert any("leaves out ['m-2']" in p for p in check_catalog(log))
    log.searches = [SearchSeen(cut.query, cut.limit, (cut.hits[0], good.hits[2]), cut.written)]
    assert any("leaves out ['m-1']" in p for p in check_catalog(log))
    log.searches = [SearchSeen(cut.query, 1, cut.hits, cut.written)]
    assert any("2 hits" in p for p in check_catalog(log))
    log.searches = [
        SearchSeen(good.query, 10, (*good.hits, ("m-4", "nothing at all")), good.written)
    ]
    assert any("none of the query's words" in p for p in check_catalog(log))


def test_a_failed_request_is_a_problem() -> None:
    log = _log()
    log.problems.append("catalog archives: NotFoundError: gone")
    assert check_catalog(log) == ["catalog archives: NotFoundError: gone"]


def test_a_patch_that_resets_a_field_it_did_not_give_is_named() -> None:
    log = _log()
    want = {"label": "persona", "value": "new", "description": "the keeper", "limit": 400}
    log.patches.append(("agents.blocks.update(persona, value='new')", want, want))
    assert check_catalog(log) == []
    log.patches.append(("agents.blocks.retrieve(persona)", {**want, "description": ""}, want))
    [problem] = check_catalog(log)
    assert "agents.blocks.retrieve(persona)" in problem and "the keeper" in problem
