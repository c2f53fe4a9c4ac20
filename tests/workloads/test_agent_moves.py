"""The workload model's harder moves: each boundary or junk call's expected outcome must be the
one kelpie_agent's real memory edits give (checked here against the edit functions
themselves, over many random blocks), so the `tool_outcomes_correct` oracle never accuses a
correct agent; parallel calls, effect keys and searches."""

from __future__ import annotations

import json
import random

import pytest

from kelpie_agent.agent import Block, builtin_by_name
from kelpie_agent.agent import _memory_edits as edits
from kelpie_agent.agent._prompt import render_memory
from kelpie_agent.llm import LlmRequest, Message, TextBlock, Tool, ToolCall, ToolResult
from kelpie_dst.workloads._agent_checks import TAG
from kelpie_dst.workloads._agent_moves import CUSTOM_TOOL, Expect, Moves
from kelpie_dst.workloads._agent_prompt import agents_named

MEMGPT = ("core_memory_append", "core_memory_replace", "archival_memory_insert", "send_message")
V1 = ("memory_insert", "memory_replace", "memory_rethink", "archival_memory_insert")


def _tools(names: tuple[str, ...]) -> tuple[Tool, ...]:
    tools = []
    for name in names:
        builtin = builtin_by_name(name)
        assert builtin is not None, name
        spec = builtin.spec()
        tools.append(Tool(spec.name, spec.description, spec.json_schema.get("parameters", {})))
    tools.append(Tool(CUSTOM_TOOL, "tally", {"type": "object", "properties": {}}))
    return tuple(tools)


def _request(scratch: str, limit: int, names: tuple[str, ...], *extra: Message) -> LlmRequest:
    blocks = [
        Block(id="b1", label="persona", value="I am agent 1. My marker is mark-a1-xx.", limit=400),
        Block(id="b2", label="human", value="tag-a1-m1 step 1.", limit=400),
        Block(id="b3", label="rules", value="mark-a1 rules", limit=200, read_only=True),
        Block(id="b4", label="scratch", value=scratch, limit=limit),
    ]
    first = Message("user", (TextBlock("tag-a1-m2 edge x3: kelp"),))
    return LlmRequest("m", (first, *extra), render_memory(blocks), _tools(names), 1000)


def _apply(name: str, args: dict[str, object], blocks: dict[str, Block]) -> str | None:
    """What kelpie_agent does with the call: the block's new value, None if refused."""
    block = blocks.get(str(args["label"]))
    assert block is not None
    try:
        value = block.value
        if name == "memory_rethink":
            value = str(args["new_memory"])
        elif name == "core_memory_append":
            value = edits.append(value, str(args["content"]))
        elif name == "memory_insert":
            value = edits.insert(value, str(args["new_string"]), args.get("insert_line", -1))  # type: ignore[arg-type]
        elif name == "memory_replace":
            value = edits.replace_once(
                value, block.label, str(args["old_string"]), str(args["new_string"])
            )
        elif name == "core_memory_replace":
            value = edits.replace_all(
                value, block.label, str(args["old_content"]), str(args["new_content"])
            )
        else:
            raise AssertionError(name)
        return edits.apply_edit(block, value, 0.0).value
    except edits.ToolError:
        return None


@pytest.mark.parametrize("names", [MEMGPT, V1], ids=["memgpt", "letta_v1"])
def test_every_edge_expectation_matches_the_real_edits(names: tuple[str, ...]) -> None:
    rng = random.Random(7)
    checked, kinds = 0, set[str]()
    for _ in range(600):
        limit = rng.randint(20, 160)
        scratch = "".join(rng.choice("ab c\né🦦") for _ in range(rng.randint(0, limit)))
        expected: list[Expect] = []
        moves = Moves(_request(scratch, limit, names), rng, expected.append, lambda *a: None)
        call = moves.edge(1, "tag-a1-m2")
        if call is None:
            continue
        [expect] = expected
        args = dict(call.input)
        args.pop("request_heartbeat", None)
        blocks = {
            "scratch": Block(id="b4", label="scratch", value=scratch, limit=limit),
            "rules": Block(
                id="b3", label="rules", value="mark-a1 rules", limit=200, read_only=True
            ),
        }
        after = _apply(call.name, args, blocks)
        assert (after is not None) is expect.ok, (expect, scratch)
        if expect.after is not None:  # what the next prompt shows: unchanged if refused
            assert expect.after == ("scratch", scratch if after is None else after)
        assert json.loads(expect.arguments) == call.input
        if call.name == "memory_replace" and args["label"] == "scratch":
            kinds.add(expect.why.split(" old_string")[0])
        checked += 1
    assert checked > 300
    if "memory_replace" in names:  # every boundary kind of old_string was drawn
        assert kinds == {
            "absent",
            "empty",
            "twice on one line",
            "across lines",
            "start",
            "end",
            "non-ASCII",
            "substring",
        }


def test_parallel_calls_have_their_own_notes_and_keys() -> None:
    effects: list[tuple[str, str, bool]] = []
    rng = random.Random(3)
    names = (*V1, "run_code")
    request = _request("", 100, names)
    for _ in range(20):
        calls = Moves(request, rng, lambda e: None, lambda *a: effects.append(a)).parallel(
            "tag-a1-m2", 2, "kelp", ()
        )
        assert 2 <= len(calls) <= 4
        notes = [json.dumps(c.input) for c in calls]
        assert all(f"tag-a1-m2 step 2.{j}" in notes[j - 1] for j in range(1, len(calls) + 1))
        assert len({c.id for c in calls}) == len(calls)
    for key, note, forbidden in effects:
        assert key.startswith("toolu_01") and note.startswith("tag-a1-m2 step 2.") and not forbidden


def test_junk_calls_must_fail_and_a_refused_effect_must_never_run() -> None:
    rng = random.Random(5)
    expected: list[Expect] = []
    effects: list[tuple[str, str, bool]] = []
    for _ in range(60):
        Moves(_request("", 100, V1), rng, expected.append, lambda *a: effects.append(a)).junk(
            1, "tag-a1-m2", 1
        )
    assert expected and all(not e.ok for e in expected)
    assert {e.why for e in expected} == {"unknown tool", "bad argument", "broken JSON arguments"}
    assert effects and all(forbidden for _, _, forbidden in effects)


def test_a_search_must_find_what_the_conversation_shows_as_stored() -> None:
    call = Message(
        "assistant",
        (ToolCall("toolu_9", "archival_memory_insert", '{"content": "tag-a1-m2 step 1: kelp"}'),),
    )
    ok = Message("user", (ToolResult("toolu_9", '{"status": "OK"}', False),))
    failed = Message("user", (ToolResult("toolu_9", '{"status": "Failed"}', True),))
    stored = Moves(
        _request("", 50, V1, call, ok), random.Random(1), lambda e: None, lambda *a: None
    )
    assert stored.stored("tag-a1-m2 step 1", "archival_memory_insert")
    lost = Moves(
        _request("", 50, V1, call, failed), random.Random(1), lambda e: None, lambda *a: None
    )
    assert not lost.stored("tag-a1-m2 step 1", "archival_memory_insert")
    assert lost.stored("tag-a1-m2 edge")  # any message


def test_an_edit_never_joins_a_cut_tag_into_another_agents_tag() -> None:
    """A ``memory_replace`` whose ``new_string`` ends in a cut tag (``tag-a1``) before text that
    goes on with digits (``1-m3``) would make the block name agent 11: the no-mixing oracle
    rightly flags that, so the workload must never ask for it (agent_chaos seed 200050 did, with
    ``tag-a2`` + ``2-m1``)."""
    rng = random.Random(11)
    checked = 0
    for _ in range(4000):
        limit = rng.randint(6, 40)
        words = ["tag-a1-m1", "reetag-a1-m1", "1-m3", "step", "7", "kelp"]
        scratch = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))[:limit]
        expected: list[Expect] = []
        moves = Moves(_request(scratch, limit, V1), rng, expected.append, lambda *a: None)
        if moves.edge(1, "tag-a1-m2") is None or not expected:
            continue
        [expect] = expected
        if expect.after is not None:
            checked += 1
            named = agents_named(expect.after[1]) | {
                int(n) for n, _ in TAG.findall(expect.after[1])
            }
            assert named <= {1}, expect
    assert checked > 1000
