"""Step shapes a real model makes and the tidy workload model did not (``step_shapes``).

The workload's model (``_agent_policy.ToolMixPolicy``) makes one or a few *different* calls per
step and answers with ``send_message`` alone. Real models also:

* call **the same tool twice in one step** (two notes appended to ``human``, two archival
  inserts), sometimes with **the very same arguments**: every call of the step must run once
  and get its own result;
* **reply and act in one step**: ``send_message`` together with a memory edit, in either
  order; the edit runs, and the reply ends the run (no LLM step after it);
* **mix a broken call with good ones** in one step (``junk`` directives): the good calls run,
  and the step does not count towards ``max_invalid_steps`` (only steps whose calls were *all*
  refused do);
* **repeat a call with the same arguments** (a search they already ran): Letta refuses the call
  once it ran ``max_identical_calls`` times in the run;
* edit a memgpt agent's scratch block with **core_memory_replace**, whose ``old_content`` may
  occur several times (every occurrence is replaced), not at all, or be empty.

Each move that has a known outcome reports an :class:`~._agent_moves.Expect` (the prompt oracle
checks it). Everything here runs only with the workload parameter ``step_shapes`` (off by
default), so the other scenarios' seeds do not move.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kelpie_agent.llm import ToolCall, ToolResult

from ..shims.llm import Call
from ._agent_edits import pick_old_string
from ._agent_moves import Moves, _filler
from ._agent_prompt import agents_named

__all__ = [
    "MAX_IDENTICAL_CALLS",
    "core_replace",
    "core_replace_model",
    "mixed_junk",
    "prior_identical",
    "repeated_search",
    "reply_with_edit",
    "shaped_calls",
]

MAX_IDENTICAL_CALLS = 3
"""``LoopConfig.max_identical_calls`` of the workload's servers (the default): a call with the
same name and arguments runs at most this many times per run; later ones are refused."""
_REFUSED = "invalid_tool_call"


def _args(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    value.pop("request_heartbeat", None)
    return value


def prior_identical(run: Sequence[Any], name: str, args: dict[str, Any]) -> int:
    """How many calls of ``name`` with ``args`` (``request_heartbeat`` aside) the run's
    messages so far show that the agent ran (refusals, which Letta does not count, aside)."""
    calls = {
        block.id
        for message in run
        for block in message.content
        if isinstance(block, ToolCall) and block.name == name and _args(block.arguments) == args
    }
    ran = 0
    for message in run:
        for block in message.content:
            if isinstance(block, ToolResult) and block.tool_call_id in calls:
                ran += _REFUSED not in block.content
    return ran


def repeated_search(
    moves: Moves, agent: int, name: str, args: dict[str, Any], find: str, run: Sequence[Any]
) -> Call:
    """A search the run may already have made with the same arguments: once it ran
    :data:`MAX_IDENTICAL_CALLS` times, it must be refused."""
    if prior_identical(run, name, args) >= MAX_IDENTICAL_CALLS:
        call = moves.call(name, args)
        return moves._expect(agent, call, False, f"repeated identical call ({name})")
    return moves.search(agent, name, args, find)


def mixed_junk(moves: Moves, agent: int, tag: str, step: int) -> list[Call]:
    """A junk call and a good memory note in one step, in either order: the junk is refused,
    the note runs (and the step is not an invalid one)."""
    junk = moves.junk(agent, tag, step)
    note = f"{tag} step {step}.2"
    good = None
    for name, field in (("core_memory_append", "content"), ("memory_insert", "new_string")):
        if name in moves.offered:
            good = moves.call(name, {"label": "human", field: f"{note}."})
            break
    if good is None:
        return [junk]
    return [junk, good] if moves.rng.random() < 0.5 else [good, junk]


def reply_with_edit(moves: Moves, tag: str, step: int, reply: Call) -> list[Call]:
    """``send_message`` and a note in ``human`` in one step, in either order."""
    note = f"{tag} step {step}.1"
    for name, field in (("core_memory_append", "content"), ("memory_insert", "new_string")):
        if name in moves.offered:
            edit = moves.call(name, {"label": "human", field: f"{note}."})
            return [reply, edit] if moves.rng.random() < 0.5 else [edit, reply]
    return [reply]


def core_replace_model(value: str, old: str, new: str, limit: int) -> tuple[bool, str, str]:
    """``(ok, value after, why)`` of Letta's ``core_memory_replace``: *every* occurrence of a
    non-empty ``old_content`` is replaced; absent or empty is an error; so is a result over
    the block's limit (in characters)."""
    if old == "":
        return False, value, "an empty old_content"
    count = value.count(old)
    if count == 0:
        return False, value, "old_content absent"
    after = value.replace(old, new)
    if len(after) > limit:
        return False, value, f"replace of {count} to {len(after)}/{limit}"
    return True, after, f"replace of {count} occurrence(s), to {len(after)}/{limit}"


def core_replace(moves: Moves, agent: int, tag: str) -> Call | None:
    """``core_memory_replace`` on ``scratch`` with a boundary ``old_content`` (twice on a line,
    across lines, non-ASCII, empty, absent), sized to land near the block's limit."""
    scratch = moves.blocks().get("scratch")
    if scratch is None or "core_memory_replace" not in moves.offered or not scratch.value:
        return None
    rng, value, limit = moves.rng, scratch.value, scratch.chars_limit
    old, kind = pick_old_string(value, tag, agent, rng)
    count = max(1, value.count(old)) if old else 1
    target = limit + rng.choice((-1, 0, 1, -limit // 2))
    new = _filler(max(1, (target - (len(value) - count * len(old))) // count), tag, False, rng)
    ok, after, why = core_replace_model(value, old, new, limit)
    if (agents_named(after) | _tagged(after)) - {agent}:
        old, kind = f"{tag} absent", "absent"  # see Moves._replace: a cut tag names another
        ok, after, why = core_replace_model(value, old, new, limit)
    args = {"label": "scratch", "old_content": old, "new_content": new}
    call = moves.call("core_memory_replace", args)
    return moves._expect(agent, call, ok, f"{kind} old_content: {why}", after=("scratch", after))


def shaped_calls(
    kind: str,
    tag: str,
    agent: int,
    message: int,
    step: int,
    moves: Moves,
    run: Sequence[Any],
    words: str = "",
    tool: str | None = None,
) -> list[Call] | None:
    """The calls of a directive's ``step`` in one of the shapes above, or None: the plain
    move (``_agent_policy._calls``). ``run``: the run's messages so far."""
    rng = moves.rng
    if kind == "parallel":
        calls = moves.parallel(tag, step, words, (tool,) if tool else ())
        if calls and rng.random() < 0.6:
            exact = rng.random() < 0.3
            pick = rng.choice(calls)
            note = f"{tag} step {step}.{len(calls) + 1}"
            twin = _same(moves, pick) if exact else _again(moves, pick, note)
            if twin is not None:
                calls.insert(rng.randint(0, len(calls)), twin)
        return calls
    if kind == "junk" and rng.random() < 0.7:
        return mixed_junk(moves, agent, tag, step)
    if kind == "conversation" and "conversation_search" in moves.offered:
        previous = f"tag-a{agent}-m{max(1, message - 1)}"  # the same query every step
        found = previous if message > 1 and moves.stored(previous) else ""
        args: dict[str, Any] = {"query": previous, "limit": 3}
        return [repeated_search(moves, agent, "conversation_search", args, found, run)]
    if kind in ("memory", "edge") and rng.random() < 0.5:
        edit = core_replace(moves, agent, tag)
        return [edit] if edit is not None else None
    return None


def _again(moves: Moves, call: Call, note: str) -> Call | None:
    """Another call of ``call``'s tool in the same step, with its own note."""
    name = call.name
    if name in ("core_memory_append", "memory_insert"):
        field = "content" if name == "core_memory_append" else "new_string"
        return moves.call(name, {"label": "human", field: f"{note}."})
    if name == "archival_memory_insert":
        return moves.call(name, {"content": f"{note}: again"})
    if name == "run_code":
        return moves.python(note, 0)
    if "request_id" in call.input:  # the custom tool or an MCP tool: an effect of its own
        args = {"text": note, "times": 2} if "times" in call.input else {"text": note}
        return moves.call(name, args, key=True)
    return None


def _same(moves: Moves, call: Call) -> Call | None:
    """The very same memory call again in the same step (real models repeat themselves): it
    runs twice, and each of the two gets its own result."""
    if call.name not in ("core_memory_append", "memory_insert"):
        return None
    args = {k: v for k, v in call.input.items() if k != "request_heartbeat"}
    return moves.call(call.name, args)


def _tagged(text: str) -> set[int]:
    from ._agent_checks import TAG

    return {int(n) for n, _ in TAG.findall(text)}
