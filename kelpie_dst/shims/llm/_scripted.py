"""Scripted SimLLM rules: match the latest turn, answer with text and/or tool calls.

A rule set is plain data (a dict, or a TOML table), so a scenario file can carry it::

    [llm]
    mode = "scripted"
    default = "Sorry, I have no script for that."

    [[llm.rules]]
    when = { user_regex = '(?i)my name is (?P<name>\\w+)' }
    text = "Nice to meet you, {name}!"
    [[llm.rules.tool_calls]]
    name = "core_memory_append"
    input = { label = "human", content = "Name: {name}" }

    [[llm.rules]]
    when = { tool = "core_memory_append" }
    text = "Saved."

The *latest turn* is the last user-role message: either the user's text (``user``,
``user_regex``) or, when it carries tool results, the last tool result (``tool_result``,
``tool_result_regex``, and ``tool``: the name of the tool that produced it). Substrings match
case-insensitively; regexes use ``re.search``. Rules are tried in order; the first match
answers; a rule without ``when`` always matches. Templates may use ``{text}`` (the whole
turn), ``{match}`` (what matched) and the regex's named groups; ``{{``/``}}`` are braces.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.llm import LlmRequest

from ._turns import Call, Reply, Turn, latest_turn

__all__ = ["Rule", "ScriptedPolicy"]

_WHEN = ("user", "user_regex", "tool_result", "tool_result_regex", "tool")
_RULE = ("when", "text", "tool_calls")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)\}|\{|\}")
DEFAULT_ANSWER = "I have no scripted answer for that."


def _fail(where: str, problem: str) -> ValueError:
    return ValueError(f"llm {where}: {problem}")


def _placeholders(template: str, where: str) -> set[str]:
    names: set[str] = set()
    for m in _PLACEHOLDER.finditer(template):
        if m.group(0) in ("{", "}"):
            raise _fail(where, f"unbalanced brace in {template!r} (write {{{{ or }}}})")
        if m.group(1):
            names.add(m.group(1))
    return names


def _fill(template: str, values: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        return values.get(m.group(1), "")

    return _PLACEHOLDER.sub(sub, template)


def _fill_value(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _fill(value, values)
    if isinstance(value, list):
        return [_fill_value(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _fill_value(v, values) for k, v in value.items()}
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


@attrs.frozen
class Rule:
    """One scripted rule. Build it with :meth:`from_dict`."""

    kind: str | None  # "user", "tool_result", or None for any turn
    needle: str | None = None  # substring, lower-cased
    pattern: re.Pattern[str] | None = None
    tool: str | None = None
    text: str = ""
    tool_calls: tuple[tuple[str, Mapping[str, Any]], ...] = attrs.field(default=(), hash=False)

    @classmethod
    def from_dict(cls, data: Any, where: str = "rule") -> Rule:
        if not isinstance(data, Mapping):
            raise _fail(where, f"a rule is a table, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_RULE))
        if unknown:
            raise _fail(where, f"unknown key {unknown[0]!r} (allowed: {', '.join(_RULE)})")
        when = data.get("when", {})
        if not isinstance(when, Mapping):
            raise _fail(f"{where}.when", "must be a table")
        bad = sorted(set(when) - set(_WHEN))
        if bad:
            raise _fail(f"{where}.when", f"unknown key {bad[0]!r} (allowed: {', '.join(_WHEN)})")
        for key, value in when.items():
            if not isinstance(value, str) or not value:
                raise _fail(f"{where}.when.{key}", "must be a non-empty string")
        matchers = [k for k in _WHEN[:4] if k in when]
        if len(matchers) > 1:
            raise _fail(f"{where}.when", f"use one of {', '.join(_WHEN[:4])}, not several")
        key = matchers[0] if matchers else None
        kind = key.removesuffix("_regex") if key else ("tool_result" if "tool" in when else None)
        if kind == "user" and "tool" in when:
            raise _fail(f"{where}.when", "'tool' goes with tool_result matches, not user ones")
        pattern = None
        if key and key.endswith("_regex"):
            try:
                pattern = re.compile(when[key])
            except re.error as error:
                raise _fail(
                    f"{where}.when.{key}", f"invalid regex {when[key]!r}: {error}"
                ) from None
        text = data.get("text", "")
        if not isinstance(text, str):
            raise _fail(f"{where}.text", "must be a string")
        calls = _calls(data.get("tool_calls", []), f"{where}.tool_calls")
        if not text and not calls:
            raise _fail(where, "answers with nothing: give 'text' and/or 'tool_calls'")
        known = {"text", "match", *(pattern.groupindex if pattern else ())}
        for template in [text, *(s for _, args in calls for s in _strings(args))]:
            missing = sorted(_placeholders(template, where) - known)
            if missing:
                raise _fail(
                    where,
                    f"unknown placeholder {{{missing[0]}}} (known: {', '.join(sorted(known))})",
                )
        needle = when[key].lower() if key and pattern is None else None
        return cls(kind, needle, pattern, when.get("tool"), text, calls)

    def answer(self, turn: Turn) -> Reply | None:
        """The reply if this rule matches ``turn``, else ``None``."""
        if self.kind is not None and turn.kind != self.kind:
            return None
        if self.tool is not None and turn.tool != self.tool:
            return None
        values = {"text": turn.text, "match": turn.text}
        if self.needle is not None:
            at = turn.text.lower().find(self.needle)
            if at < 0:
                return None
            values["match"] = turn.text[at : at + len(self.needle)]
        if self.pattern is not None:
            m = self.pattern.search(turn.text)
            if m is None:
                return None
            values["match"] = m.group(0)
            values.update({k: v or "" for k, v in m.groupdict().items()})
        reply: list[str | Call] = [_fill(self.text, values)] if self.text else []
        for name, args in self.tool_calls:
            reply.append(Call(name, _fill_value(dict(args), values)))
        return tuple(reply)


def _calls(data: Any, where: str) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    if not isinstance(data, list):
        raise _fail(where, "must be a list of {name, input} tables")
    out = []
    for i, call in enumerate(data):
        at = f"{where}[{i}]"
        if not isinstance(call, Mapping):
            raise _fail(at, "must be a table with 'name' and 'input'")
        unknown = sorted(set(call) - {"name", "input"})
        if unknown:
            raise _fail(at, f"unknown key {unknown[0]!r} (allowed: name, input)")
        name, args = call.get("name"), call.get("input", {})
        if not isinstance(name, str) or not name:
            raise _fail(f"{at}.name", "must be a non-empty string")
        if not isinstance(args, Mapping):
            raise _fail(f"{at}.input", "must be a table (the tool's JSON arguments)")
        out.append((name, dict(args)))
    return tuple(out)


@attrs.frozen
class ScriptedPolicy:
    """Answers from rules (see the module docstring); ``default`` when none matches."""

    rules: tuple[Rule, ...] = ()
    default: str = DEFAULT_ANSWER

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScriptedPolicy:
        """Load ``{"rules": [...], "default": "..."}`` (``mode`` is allowed and ignored)."""
        if not isinstance(data, Mapping):
            raise _fail("scripted", f"expected a table, got {type(data).__name__}")
        unknown = sorted(set(data) - {"mode", "rules", "default"})
        if unknown:
            raise _fail("scripted", f"unknown key {unknown[0]!r} (allowed: rules, default)")
        rules = data.get("rules", [])
        if not isinstance(rules, Sequence) or isinstance(rules, str):
            raise _fail("rules", "must be a list of rule tables")
        default = data.get("default", DEFAULT_ANSWER)
        if not isinstance(default, str) or not default:
            raise _fail("default", "must be a non-empty string")
        return cls(tuple(Rule.from_dict(r, f"rules[{i}]") for i, r in enumerate(rules)), default)

    def respond(self, request: LlmRequest, rng: random.Random) -> Reply:
        turn = latest_turn(request)
        for rule in self.rules:
            reply = rule.answer(turn)
            if reply is not None:
                return reply
        return (self.default,)
