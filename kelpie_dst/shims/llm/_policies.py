"""SimLLM policies: deterministic models for simulations, tests and offline demos.

* :class:`ScriptedPolicy`: rules matched against the latest turn (see ``_scripted``).
* :class:`AdversarialPolicy`: picks among the offered tools with random arguments, mostly
  valid for the tool's JSON schema but sometimes not; sometimes names a tool that does not
  exist; sometimes answers in plain text.
* :class:`HelpfulPolicy`: a small rule-of-thumb chat model that uses memory tools sensibly
  and replies through ``send_message`` when it is offered.

:func:`policy_from_dict` builds any of them from plain data (``mode = "..."`` plus options).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from typing import Any

import attrs

from kelpie_agent.llm import LlmRequest, Tool, ToolResult

from ._schema import example, instance, invalid_instance
from ._scripted import ScriptedPolicy
from ._turns import Call, Policy, Reply, Turn, latest_turn, tool_name_of

__all__ = ["AdversarialPolicy", "HelpfulPolicy", "ScriptedPolicy", "policy_from_dict"]

_WORDS = ("the", "tide", "is", "turning", "kelp", "grows", "fast", "otters", "sleep", "here")
_GHOSTS = ("summon_kraken", "fetch_url", "exec_python", "read_mind", "format_disk")


def _babble(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 12))]
    return " ".join(words).capitalize() + "."


def _probability(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"llm adversarial.{attribute.name}: must be within [0, 1], got {value!r}")


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"llm adversarial.{attribute.name}: must be an int >= 1, got {value!r}")


@attrs.frozen
class AdversarialPolicy:
    """A hostile model. Per request: plain text with probability ``p_text`` (always when no
    tool is offered); else 1..``max_calls`` tool calls, each to a tool that does not exist
    with probability ``p_unknown_tool``, else to a random offered tool with arguments that
    break its schema with probability ``p_invalid`` (when the schema can be broken)."""

    p_text: float = attrs.field(default=0.1, validator=_probability)
    p_unknown_tool: float = attrs.field(default=0.05, validator=_probability)
    p_invalid: float = attrs.field(default=0.2, validator=_probability)
    max_calls: int = attrs.field(default=2, validator=_positive)

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        if not request.tools or rng.random() < self.p_text:
            return (_babble(rng),)
        reply: list[str | Call] = []
        if rng.random() < 0.25:
            reply.append(_babble(rng))
        for _ in range(rng.randint(1, self.max_calls)):
            if rng.random() < self.p_unknown_tool:
                name = rng.choice(_GHOSTS)
                if request.tool(name) is None:
                    reply.append(Call(name, {"value": rng.choice(_WORDS)}))
                    continue
            tool = rng.choice(request.tools)
            args = (
                invalid_instance(tool.input_schema, rng) if rng.random() < self.p_invalid else None
            )
            reply.append(
                Call(tool.name, args if args is not None else instance(tool.input_schema, rng))
            )
        return tuple(reply)


_HEARTBEAT_TYPES = ("heartbeat", "system_alert", "login", "system_message")
_NAME = re.compile(r"(?i)\b(?:my name is|call me)\s+([A-Za-z][\w'-]*)")
_REMEMBER = re.compile(r"(?i)\bremember(?:\s+that)?\s+(.+)")
_ASK_NAME = re.compile(r"(?i)\b(?:what(?:'s| is) my name|who am i)\b")
_RECALL = re.compile(
    r"(?i)\b(?:do you remember|do you recall|what did i (?:tell|say)|recall)\b(.*)"
)
_GREETING = re.compile(r"(?i)^\s*(?:hi|hello|hey|good (?:morning|afternoon|evening))\b")
_KNOWN_NAME = re.compile(r"(?im)^\s*name:\s*(\S.*?)\s*$")
_FOUND_NAME = re.compile(r"(?i)\bname(?: is|:)\s*([A-Za-z][\w'-]*)")
_SEARCHES = ("archival_memory_search", "conversation_search")


def _is_system_json(text: str) -> bool:
    if not text.lstrip().startswith("{"):
        return False
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("type") in _HEARTBEAT_TYPES


def _turn_and_user_text(request: LlmRequest) -> tuple[Turn, str]:
    """The latest meaningful turn (heartbeats skipped) and the user's latest real text."""
    turn: Turn | None = None
    messages = request.messages
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role != "user":
            continue
        results = [b for b in message.content if isinstance(b, ToolResult)]
        if results:
            if turn is None:
                name = tool_name_of(messages[:position], results[-1].tool_call_id)
                turn = Turn("tool_result", results[-1].content, name, results[-1].is_error)
            continue
        if _is_system_json(message.text):
            continue
        return (turn or Turn("user", message.text)), message.text
    return (turn or latest_turn(request)), ""


def _result_text(content: str) -> str:
    """The message of a Letta-style ``{"status": ..., "message": ...}`` result, else the text."""
    try:
        data = json.loads(content)
    except ValueError:
        return content.strip()
    if isinstance(data, dict) and "message" in data:
        data = data["message"]
    return (data if isinstance(data, str) else json.dumps(data)).strip()


@attrs.frozen
class HelpfulPolicy:
    """A simple, deterministic chat model for demos and an offline server.

    It stores "my name is X" with ``core_memory_append`` (label ``human``) and "remember Y"
    with ``archival_memory_insert``, answers "what is my name?" from the core memory in the
    system prompt (``Name: X``) or with ``archival_memory_search``, searches memory when asked
    to recall, and otherwise chats. It answers through ``send_message`` if that tool is
    offered, else in plain text. Memory calls set ``request_heartbeat`` when the tool has it.
    """

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        turn, user_text = _turn_and_user_text(request)
        if turn.kind == "tool_result":
            return self._after_tool(request, turn, user_text)
        text = turn.text.strip()
        known = _KNOWN_NAME.search(request.system)
        name = _NAME.search(text)
        if name:
            who = name.group(1)[:1].upper() + name.group(1)[1:]
            call = self._call(request, "core_memory_append", label="human", content=f"Name: {who}")
            call = call or self._call(
                request, "archival_memory_insert", content=f"The user's name is {who}."
            )
            return (call,) if call else self._say(request, f"Nice to meet you, {who}!")
        if _ASK_NAME.search(text):
            if known:
                return self._say(request, f"Your name is {known.group(1)}.")
            call = self._call(request, "archival_memory_search", query="name")
            return (
                (call,) if call else self._say(request, "I don't know your name yet. What is it?")
            )
        recall = _RECALL.search(text)
        if recall:
            query = recall.group(1).strip(" ?.!").removeprefix("about ").strip() or text
            for search in _SEARCHES:
                call = self._call(request, search, query=query)
                if call:
                    return (call,)
            return self._say(request, "I'm afraid I don't remember anything about that.")
        fact = _REMEMBER.search(text)
        if fact:
            what = fact.group(1).strip().rstrip(".!")
            call = self._call(request, "archival_memory_insert", content=what)
            call = call or self._call(request, "core_memory_append", label="human", content=what)
            return (call,) if call else self._say(request, f"I'll keep that in mind: {what}.")
        if _GREETING.search(text):
            who = f", {known.group(1)}" if known else ""
            return self._say(request, f"Hello{who}! How can I help you today?")
        return self._say(request, f'I hear you. You said: "{text}"' if text else "I'm here.")

    def _after_tool(self, request: LlmRequest, turn: Turn, user_text: str) -> Reply:
        result = _result_text(turn.text)
        if turn.tool == "send_message":
            return ("Is there anything else I can help with?",)
        if turn.is_error:
            return self._say(request, f"Sorry, that did not work: {result[:200]}")
        if turn.tool in _SEARCHES:
            found = _FOUND_NAME.search(result)
            if found and _ASK_NAME.search(user_text):
                return self._say(request, f"Your name is {found.group(1)}.")
            if not result or result in ("[]", "{}", "null") or "no results" in result.lower():
                return self._say(request, "I couldn't find anything about that in my memory.")
            return self._say(request, f"Here is what I remember: {result[:300]}")
        name = _NAME.search(user_text)
        if name:
            who = name.group(1)[:1].upper() + name.group(1)[1:]
            return self._say(request, f"Nice to meet you, {who}! I'll remember that.")
        if turn.tool and ("memory" in turn.tool or turn.tool.startswith("archival")):
            return self._say(request, "Got it, I'll remember that.")
        return self._say(request, f"Done: {result[:200]}" if result else "Done.")

    def _say(self, request: LlmRequest, text: str) -> Reply:
        call = self._call(request, "send_message", message=text)
        return (call,) if call else (text,)

    def _call(self, request: LlmRequest, name: str, **args: Any) -> Call | None:
        tool = request.tool(name)
        if tool is None:
            return None
        return Call(name, _complete(tool, args))


def _complete(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` fitted to the tool's schema: unknown keys dropped (when the schema lists its
    properties), ``request_heartbeat`` set, other missing required values filled."""
    props: Mapping[str, Any] = tool.input_schema.get("properties", {})
    out = {k: v for k, v in args.items() if not props or k in props}
    if "request_heartbeat" in props:
        out["request_heartbeat"] = tool.name != "send_message"
    for name in tool.input_schema.get("required", ()):
        if name not in out:
            out[name] = example(props.get(name, {}))
    return out


_MODES = ("adversarial", "helpful", "scripted")


def policy_from_dict(data: Mapping[str, Any]) -> Policy:
    """A policy from plain data: ``{"mode": "scripted", "rules": [...], "default": ...}``,
    ``{"mode": "adversarial", "p_text": ..., "p_unknown_tool": ..., "p_invalid": ...,
    "max_calls": ...}`` or ``{"mode": "helpful"}``. Bad data raises a one-line ValueError."""
    if not isinstance(data, Mapping):
        raise ValueError(f"llm: expected a table with a 'mode', got {type(data).__name__}")
    mode = data.get("mode")
    if mode not in _MODES:
        raise ValueError(f"llm.mode: must be one of {', '.join(_MODES)}, got {mode!r}")
    if mode == "scripted":
        return ScriptedPolicy.from_dict(data)
    options = {k: v for k, v in data.items() if k != "mode"}
    if mode == "helpful":
        if options:
            raise ValueError(f"llm helpful: takes no options, got {', '.join(sorted(options))}")
        return HelpfulPolicy()
    allowed = [a.name for a in attrs.fields(AdversarialPolicy)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"llm adversarial: unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})"
        )
    return AdversarialPolicy(**options)
