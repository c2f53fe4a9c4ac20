"""agent_imports: agent-file import options, a react agent's tools, and a client that follows
the server's retry advice, through the SDK under faults. The scenario passes and repeats its
trace; the oracles name hand-made bad histories."""

from __future__ import annotations

import pytest

from kelpie_dst.scenario import load_scenario, run_scenario
from kelpie_dst.workloads._agent_advice import AdviceLog, Sent, check_advice
from kelpie_dst.workloads._agent_imports import (
    BASE_TOOLS,
    HISTORY,
    OVER,
    PLAIN,
    SUFFIXED,
    TOOL,
    Copy,
    ImportsLog,
    _source,
    check_imports,
)

SOURCE = {
    "max_files_open": 3,
    "per_file_view_window_char_limit": 2500,
    "model": "anthropic/claude-sonnet-5-5",
    "tool": "tool-1",
}
TEXTS = [text for _, text in HISTORY]


@pytest.mark.slow  # two runs of about 6 s each; the short sweep runs it in CI
def test_the_scenario_passes_and_repeats_its_trace() -> None:
    scenario = load_scenario("agent_imports")
    first, again = run_scenario(scenario, 0), run_scenario(scenario, 0)
    assert first.ok, first.result.failure and first.result.failure.describe()
    assert first.metrics["imports.copies"] == 3
    assert first.metrics["imports.problems"] == 0
    assert first.metrics["advice.acked"] > 0
    assert first.metrics["advice.problems"] == 0
    assert first.result.trace_hash == again.result.trace_hash


def _copy(what: str, want: str, handle: str | None, history: bool, **seen: object) -> Copy:
    shown = {
        "name": want,
        "model": handle or SOURCE["model"],
        "max_files_open": 3,
        "per_file_view_window_char_limit": 2500,
        "tools": {TOOL: "tool-1"},
    }
    shown.update(seen)
    return Copy(what, want, handle, history, True, shown, ["hi", *TEXTS] if history else ["hi"])


def _log(*copies: Copy) -> ImportsLog:
    log = ImportsLog(source=dict(SOURCE))
    log.copies = list(copies) or [
        _copy("stripped", SUFFIXED, "anthropic/claude-haiku-4-5", False),
        _copy("over", OVER, "anthropic/claude-sonnet-5-5", True),
        _copy("plain", PLAIN, None, True),
    ]
    log.tool_sources = [("after no override", _source(1), _source(1))]
    log.scrubbed = [("scrubbed", 0)]
    log.react = [("attaching conversation_search", "refused")]
    log.react_tools = [("at the end", ["web_search"])]
    return log


def test_imports_that_did_what_their_options_say_pass() -> None:
    assert check_imports(_log()) == []


def test_an_option_not_honoured_is_named() -> None:
    bad = [
        _copy("stripped", SUFFIXED, "anthropic/claude-haiku-4-5", False, name="imports-src"),
        _copy("model", SUFFIXED, "anthropic/claude-haiku-4-5", False, model="anthropic/x"),
        _copy("window", OVER, None, True, per_file_view_window_char_limit=50_000),
        _copy("new tool", OVER, None, True, tools={TOOL: "tool-2"}),
    ]
    problems = check_imports(_log(*bad))
    assert len(problems) == 4, problems
    kept = _copy("kept history", SUFFIXED, None, False)
    kept.texts = ["hi", TEXTS[0]]
    lost = _copy("lost history", OVER, None, True)
    lost.texts = ["hi", *TEXTS[:-1]]
    assert len(check_imports(_log(kept, lost))) == 2
    log = _log()
    log.tool_sources = [("after no override", _source(1), _source(2))]
    log.scrubbed = [("scrubbed", 3)]
    log.react = [("attaching archival_memory_insert", "attached")]
    log.react_tools = [("at the end", ["conversation_search"])]
    assert len(check_imports(log)) == 4


def test_a_copy_found_by_name_after_a_cut_import_is_not_judged_on_its_history() -> None:
    unsure = _copy("over", OVER, None, True)
    unsure.sure, unsure.texts = False, []
    assert check_imports(_log(unsure)) == []


def _advice(*sent: Sent, messages: dict[str, int], passages: dict[str, int]) -> AdviceLog:
    log = AdviceLog(sent=list(sent))
    log.stored = {"message": messages, "passage": passages}
    return log


def test_advice_followed_storing_each_once_passes() -> None:
    log = _advice(
        Sent("message", "m0", ["503 x-should-retry=true", "ok"], True),
        Sent("message", "m1", ["503 x-should-retry=false"]),
        Sent("passage", "p0", ["no answer (TooSlowError)"]),
        Sent("passage", "p1", ["ok"], True),
        messages={"m0": 1, "m1": 1},
        passages={"p0": 1, "p1": 1},
    )
    assert check_advice(log) == []


def test_a_text_stored_twice_or_an_acknowledged_one_lost_is_named() -> None:
    log = _advice(
        Sent("message", "m0", ["503 x-should-retry=true", "ok"], True),
        Sent("passage", "p0", ["ok"], True),
        Sent("passage", "p1", ["ok"], True),
        messages={"m0": 2},
        passages={"p0": 2},
    )
    problems = check_advice(log)
    assert len(problems) == 3, problems
    assert any("stored 2 times" in p and "m0" in p for p in problems)
    assert any("acknowledged but not stored" in p and "p1" in p for p in problems)


def test_base_tools_other_than_the_documented_set_are_named() -> None:
    log = _log()
    log.base_tools = [
        ("react_agent", []),
        ("memgpt_agent", list(BASE_TOOLS["memgpt_agent"])),
        ("letta_v1_agent", [t for t in BASE_TOOLS["letta_v1_agent"] if t != "memory_insert"]),
    ]
    problems = check_imports(log)
    assert len(problems) == 1 and "letta_v1_agent" in problems[0], problems
