"""The simulated model's harder moves: parallel calls, boundary edits, junk calls, recall.

A real model does more than one tidy call per step. These are the moves the workload's model
(``_agent_policy.ToolMixPolicy``) makes for the directive kinds beyond the plain tool kinds:

* ``parallel``: several tool calls in one step (as the Anthropic API allows), each with its own
  note ``tag-aN-mM step K.J`` and, for tools with side effects, its own idempotency key;
* ``edge``: one edit of the ``scratch`` block whose result lands exactly at, just below or just
  above the block's limit (read from the system prompt, so the move depends on what the prompt
  shows), with empty, non-ASCII and very long texts, edits of the read-only ``rules`` block and
  replacements of text that is not there;
* ``junk``: a call to a tool that does not exist, with arguments that break the tool's schema,
  or with broken JSON;
* ``recall``: no tool; the reply quotes the agent's persona marker and its notes, read from the
  system prompt.

Each edge and junk call comes with an :class:`Expect`: the outcome any correct agent must give
(the prompt oracle checks it when the result comes back). Calls with a side effect carry their
id as ``request_id`` (an idempotency key the simulated external service dedups on), and are
registered as effect calls for the tool-effect oracle.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.llm import LlmRequest, Tool, ToolCall, ToolResult

from ..shims.llm import Call
from ._agent_checks import TAG
from ._agent_edits import insert_model, pick_old_string, replace_model
from ._agent_prompt import PromptBlock, agents_named, prompt_blocks

__all__ = [
    "CUSTOM_TOOL",
    "CUSTOM_TOOL_SOURCE",
    "EFFECT_SERVICE",
    "Expect",
    "Moves",
    "call_id",
    "encode_args",
]

CUSTOM_TOOL = "tally"
EFFECT_SERVICE = "ledger"
"""The simulated external service's name: a builtin in the sandbox, an MCP tool argument."""
CUSTOM_TOOL_SOURCE = '''
def tally(text: str, times: int = 2, request_id: str = "") -> str:
    """Record a text with the ledger service, repeat it and count its words.

    Args:
        text: The text to record and repeat.
        times: How many times.
        request_id: The idempotency key of this call.
    """
    if request_id:
        ledger(request_id, text)
    words = text.split()
    return " ".join([text] * times) + " (" + str(len(words) * times) + " words)"
'''
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_WIDE = ("é", "ß", "ø", "🦦", "🌊", "海")


def call_id(rng: random.Random) -> str:
    """A fresh tool-call id in Anthropic's shape, chosen by the model itself."""
    return "toolu_01" + "".join(rng.choice(_ALPHABET) for _ in range(24))


def encode_args(args: Mapping[str, Any]) -> str:
    """Arguments as the engine encodes them (``ToolCall.of``)."""
    return json.dumps(dict(args), separators=(",", ":"), ensure_ascii=False)


@attrs.frozen
class Expect:
    """The outcome a correct agent gives for call ``call_id`` (``name`` with ``arguments``,
    as the model sent it): ``ok`` or a failed result, and why."""

    agent: int
    call_id: str
    name: str
    arguments: str
    ok: bool
    why: str
    contains: str = ""  # a search: its successful result must show this text
    after: tuple[str, str] | None = None  # a success: (label, value) the next prompt shows


def _filler(length: int, head: str, wide: bool, rng: random.Random) -> str:
    """``length`` characters (code points) starting with ``head`` when it fits."""
    if length <= 0:
        return ""
    text = head[:length] + (" " if len(head) < length else "")
    pool = _WIDE if wide else ("kelp", "tide", "reef", "foam")
    while len(text) < length:
        text += rng.choice(pool) + ("" if wide else " ")
    return text[:length]


def _used_up(run: Sequence[Any], name: str, call: Call) -> bool:
    """Whether the run already ran ``call`` (same name and arguments) as often as the servers'
    ``max_identical_calls`` allows, so it will be refused (``_agent_shapes.prior_identical``)."""
    from ._agent_shapes import MAX_IDENTICAL_CALLS, prior_identical

    args = {k: v for k, v in call.input.items() if k != "request_heartbeat"}
    return prior_identical(run, name, args) >= MAX_IDENTICAL_CALLS


class Moves:
    """Builds the harder moves for one request. ``expect`` and ``effect`` receive the
    expectations and the effect calls (id, note, forbidden) the moves create."""

    def __init__(
        self,
        request: LlmRequest,
        rng: random.Random,
        expect: Callable[[Expect], None],
        effect: Callable[[str, str, bool], None],
    ) -> None:
        self.request = request
        self.rng = rng
        self.expect = expect
        self.effect = effect
        self.offered: dict[str, Tool] = {t.name: t for t in request.tools}
        # the run's messages so far (after its input), when the policy knows them
        self.run: Sequence[Any] = ()

    # -- helpers ---------------------------------------------------------------------------------
    def call(self, name: str, args: dict[str, Any], *, key: bool = False) -> Call:
        """A call to an offered tool (``request_heartbeat`` added where the schema has it);
        ``key``: a side effect, with the call id as its ``request_id``."""
        ident = call_id(self.rng)
        args = dict(args)
        if key:
            args["request_id"] = ident
            self.effect(ident, str(args.get("text", "")), False)
        tool = self.offered.get(name)
        if tool is not None and "request_heartbeat" in tool.input_schema.get("properties", {}):
            args["request_heartbeat"] = True
        return Call(name, args, id=ident)

    def _expect(
        self,
        agent: int,
        call: Call,
        ok: bool,
        why: str,
        contains: str = "",
        after: tuple[str, str] | None = None,
    ) -> Call:
        arguments = call.raw if call.raw is not None else encode_args(call.input)
        assert call.id is not None
        self.expect(Expect(agent, call.id, call.name, arguments, ok, why, contains, after))
        return call

    def search(self, agent: int, name: str, args: dict[str, Any], find: str) -> Call:
        """A search that must find ``find`` (empty: nothing known to be stored yet)."""
        call = self.call(name, args)
        if not find:
            return call
        return self._expect(agent, call, True, f"search for {find!r}", find)

    def stored(self, text: str, tool: str | None = None) -> bool:
        """Does the conversation show ``text`` as stored: in a message (any, if ``tool`` is
        None), or in a successful call of ``tool``?"""
        calls: dict[str, str] = {}
        for message in self.request.messages:
            for block in message.content:
                if isinstance(block, ToolCall):
                    calls[block.id] = block.name
                    if tool is None and text in block.arguments:
                        return True
                elif isinstance(block, ToolResult):
                    if tool is None and text in block.content:
                        return True
                    if (
                        tool is not None
                        and calls.get(block.tool_call_id) == tool
                        and not block.is_error
                        and text in self._arguments(block.tool_call_id)
                    ):
                        return True
                elif tool is None and text in block.text:
                    return True
        return False

    def _arguments(self, call_id: str) -> str:
        for message in self.request.messages:
            for block in message.content:
                if isinstance(block, ToolCall) and block.id == call_id:
                    return block.arguments
        return ""

    def blocks(self) -> dict[str, PromptBlock]:
        return prompt_blocks(self.request.system) or {}

    # -- parallel ----------------------------------------------------------------------------------
    def parallel(self, tag: str, step: int, words: str, mcp: tuple[str, ...]) -> list[Call]:
        """Two to four calls in one step, each with its own note ``<tag> step K.J``."""
        kinds = [
            name
            for name in ("memory", "archival_memory_insert", CUSTOM_TOOL, "run_code", *mcp)
            if name in self.offered
            or (name == "memory" and {"core_memory_append", "memory_insert"} & set(self.offered))
        ]
        self.rng.shuffle(kinds)
        calls = []
        for j, kind in enumerate(kinds[: self.rng.randint(2, 4)], start=1):
            note = f"{tag} step {step}.{j}"
            if kind == "memory":
                if "core_memory_append" in self.offered:
                    calls.append(
                        self.call("core_memory_append", {"label": "human", "content": f"{note}."})
                    )
                else:
                    calls.append(
                        self.call("memory_insert", {"label": "human", "new_string": f"{note}."})
                    )
            elif kind == "archival_memory_insert":
                calls.append(self.call(kind, {"content": f"{note}: {words}"}))
            elif kind == "run_code":
                calls.append(self.python(note, step))
            elif kind == CUSTOM_TOOL:
                calls.append(self.call(kind, {"text": note, "times": 2}, key=True))
            else:
                calls.append(self.call(kind, {"text": note}, key=True))
        return calls

    def python(self, note: str, step: int, *, forbidden: bool = False) -> Call:
        """Python in the sandbox that records ``note`` with the ledger service."""
        ident = call_id(self.rng)
        code = f"{EFFECT_SERVICE}({ident!r}, {note!r})\nprint({note!r}, {step} * 7)"
        self.effect(ident, note, forbidden)
        return Call("run_code", {"code": code, "language": "python"}, id=ident)

    # -- tool rules --------------------------------------------------------------------------------
    def hidden(self, agent: int, name: str, args: dict[str, Any], *, key: bool) -> Call:
        """A call of ``name``, which the agent has but its rules no longer offer (the model
        disobeys, as models do): it must be refused, and never take effect."""
        if name == "run_code" and "note" in args:  # Python that records with the ledger
            call = self.python(str(args["note"]), 0, forbidden=True)
        else:
            ident = call_id(self.rng)
            args = dict(args)
            if key:
                args["request_id"] = ident
                self.effect(ident, str(args.get("text", "")), True)
            call = Call(name, args, id=ident)
        return self._expect(agent, call, False, f"{name} is used up by its tool rule")

    # -- boundary edits -------------------------------------------------------------------------
    def edge(self, agent: int, tag: str) -> Call | None:
        """One edit of ``scratch`` (or of the read-only ``rules``) with a known outcome."""
        blocks = self.blocks()
        scratch = blocks.get("scratch")
        if scratch is None:
            return None
        rng = self.rng
        limit, current, value = scratch.chars_limit, scratch.chars_current, scratch.value
        target = limit + rng.choice((-1, 0, 0, 1, 1, -limit, 9 * limit))
        wide = rng.random() < 0.4
        case = rng.random()
        if case < 0.1 and "rules" in blocks:
            return self._readonly(agent, tag)
        if "memory_rethink" in self.offered and (case < 0.3 or not scratch.value):
            text = "" if target <= 0 else _filler(target, tag, wide, rng)
            call = self.call("memory_rethink", {"label": "scratch", "new_memory": text})
            ok, why = len(text) <= limit, f"rethink to {len(text)}/{limit}"
            if ok and _used_up(self.run, "memory_rethink", call):  # the same rethink, again
                ok, why = False, "repeated identical call (memory_rethink)"
            return self._expect(agent, call, ok, why, after=("scratch", text if ok else value))
        if "memory_replace" in self.offered and case < 0.8 and scratch.value:
            return self._replace(agent, tag, scratch, target, wide)
        if "memory_insert" in self.offered and case < 0.85:
            return self._insert_at(agent, tag, scratch)
        for name, field in (("core_memory_append", "content"), ("memory_insert", "new_string")):
            if name in self.offered:
                length = max(0, target - current - 1)
                text = _filler(length, tag, wide, rng)
                call = self.call(name, {"label": "scratch", field: text})
                total = current + 1 + len(text)
                ok, why = total <= limit, f"{name} to {total}/{limit}"
                after = insert_model(value, text) if ok else value
                return self._expect(agent, call, ok, why, after=("scratch", after or value))
        return None

    def _replace(
        self, agent: int, tag: str, scratch: PromptBlock, target: int, wide: bool
    ) -> Call | None:
        """``memory_replace`` with a boundary ``old_string`` (twice on one line, across lines,
        at the start or end, non-ASCII, empty, absent), judged by Letta's rule
        (``_agent_edits.replace_model``); a success must show the modelled value next."""
        value, rng = scratch.value, self.rng
        old, kind = pick_old_string(value, tag, agent, rng)
        if rng.random() < 0.15:
            new = ""  # a deletion
        else:  # sized so that a unique old_string lands the block at the target length
            new = _filler(max(1, target - (len(value) - len(old))), tag, wide, rng)
        ok, after, why = replace_model(value, old, new, scratch.chars_limit)
        if (agents_named(after) | {int(n) for n, _ in TAG.findall(after)}) - {agent}:
            # ``new`` ends in a cut tag (``tag-a2``) and the text after ``old`` goes on with
            # digits (``2-m1``): the block would name agent 22, which the no-mixing oracle
            # rightly flags. Ask for an absent ``old_string`` instead (no further draws).
            old, kind = f"{tag} absent", "absent"
            ok, after, why = replace_model(value, old, new, scratch.chars_limit)
        args = {"label": "scratch", "old_string": old, "new_string": new}
        call = self.call("memory_replace", args)
        return self._expect(agent, call, ok, f"{kind} old_string: {why}", after=("scratch", after))

    def _readonly(self, agent: int, tag: str) -> Call | None:
        """Any edit tool, on the read-only block: always refused."""
        edits: list[tuple[str, dict[str, Any]]] = [
            ("memory_rethink", {"label": "rules", "new_memory": f"{tag} rewrote the rules"}),
            ("core_memory_append", {"label": "rules", "content": f"{tag} amended"}),
            ("memory_insert", {"label": "rules", "new_string": f"{tag} amended"}),
            ("memory_replace", {"label": "rules", "old_string": "rules", "new_string": "laws"}),
            (
                "core_memory_replace",
                {"label": "rules", "old_content": "rules", "new_content": "laws"},
            ),
        ]
        offered = [(name, args) for name, args in edits if name in self.offered]
        if not offered:
            return None
        name, args = self.rng.choice(offered)
        return self._expect(agent, self.call(name, args), False, "read-only block")

    def _insert_at(self, agent: int, tag: str, scratch: PromptBlock) -> Call | None:
        """``memory_insert`` before the first line (0), after line n-1, n (the last), -1 (the
        end), or at n+1 or -2 (out of range)."""
        lines = scratch.value.count("\n") + 1
        at = self.rng.choice((0, lines - 1, lines, -1, lines + 1, -2))
        text = tag[: max(1, min(len(tag), scratch.chars_limit - scratch.chars_current - 1))]
        call = self.call(
            "memory_insert", {"label": "scratch", "new_string": text, "insert_line": at}
        )
        total = scratch.chars_current + 1 + len(text)
        after = insert_model(scratch.value, text, at)
        ok = after is not None and total <= scratch.chars_limit
        why = f"insert after line {at} of {lines}, to {total}"
        shown = after if ok and after is not None else scratch.value
        return self._expect(agent, call, ok, why, after=("scratch", shown))

    # -- junk --------------------------------------------------------------------------------------
    def junk(self, agent: int, tag: str, step: int) -> Call:
        """A call no correct agent runs: an unknown tool, broken arguments or broken JSON."""
        rng, note = self.rng, f"{tag} step {step}"
        case = rng.random()
        if case < 0.3 or not self.offered:
            call = Call("summon_kraken", {"text": note}, id=call_id(rng))
            return self._expect(agent, call, False, "unknown tool")
        if case < 0.65 and CUSTOM_TOOL in self.offered:
            ident = call_id(rng)  # an effect tool with a bad argument: it must never run
            args = {"text": note, "times": "twice", "request_id": ident}
            self.effect(ident, note, True)  # forbidden: the agent must refuse it
            return self._expect(agent, Call(CUSTOM_TOOL, args, id=ident), False, "bad argument")
        name = rng.choice(sorted(self.offered))
        raw = encode_args({"text": note})[:-3]  # cut inside the JSON
        call = Call(name, id=call_id(rng), raw=raw)
        return self._expect(agent, call, False, "broken JSON arguments")

    # -- recall ----------------------------------------------------------------------------------
    def recall(self) -> str:
        """What the prompt's memory says: the persona marker and the notes in ``human``."""
        blocks = self.blocks()
        persona = blocks.get("persona")
        marker = next((w for w in (persona.value.split() if persona else ()) if "mark-a" in w), "")
        human = blocks.get("human")
        notes = human.value.count("step") if human else 0
        return f"recall {marker.rstrip('.') or 'nothing'} notes={notes}"
