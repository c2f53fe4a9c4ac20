"""The tools of one run: what the LLM is offered, and checking the calls it makes.

One registry covers built-ins, custom tools and MCP tools (all :class:`ToolSpec`). For a
``memgpt_agent`` every non-terminal tool gets a required boolean ``request_heartbeat``
(stripped before the tool runs; ``"true"``/``"false"`` strings are accepted). A
``react_agent`` is never offered memory tools. Every call is checked before it runs: a known
tool, arguments that are a JSON object, and valid against the schema (jsonschema). A call that
fails a check is *refused*: the LLM gets a one-line ``invalid_tool_call`` error as the result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import jsonschema  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

from kelpie_agent.llm import Tool, ToolCall

from ._builtins import MEMORY_TOOLS, Builtin, builtin_by_name
from ._models import AgentRecord, ToolRule, ToolSpec
from ._tool_rules import RuleSolver

__all__ = ["BoundTool", "Prepared", "Refused", "ToolSet", "validate_arguments"]

HEARTBEAT = "request_heartbeat"
_HEARTBEAT_SCHEMA = {
    "type": "boolean",
    "description": "Request an immediate heartbeat after function execution. Set it to true if "
    "you want to send a follow-up message or run a follow-up tool call.",
}


@attrs.frozen
class BoundTool:
    """A tool as one agent uses it."""

    spec: ToolSpec
    builtin: Builtin | None
    terminal: bool  # ends the run after it runs
    heartbeat: bool  # has the request_heartbeat parameter (memgpt, non-terminal)
    continues: bool  # a continue_loop or child rule: the loop always continues after it
    max_count: int | None  # a max_count_per_step rule
    approval: bool  # a call waits for a client's approval (rule, or the tool's default)
    schema: Mapping[str, Any] = attrs.field(hash=False, eq=False)
    validator: Any = attrs.field(hash=False, eq=False, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    def llm_tool(self) -> Tool:
        return Tool(self.name, self.spec.description, self.schema)


@attrs.frozen
class Prepared:
    """A call that passed the checks: run ``tool`` with ``args``."""

    tool: BoundTool
    args: dict[str, Any] = attrs.field(hash=False)
    heartbeat: bool


@attrs.frozen
class Refused:
    """A call that failed a check; ``message`` goes back to the LLM."""

    message: str


_VALIDATORS: dict[str, Any] = {}  # canonical schema text -> compiled validator (or None)
_CACHE_SIZE = 1024


def _validator(schema: Mapping[str, Any]) -> Any:
    """A compiled jsonschema validator, cached by the schema's text (checking a schema costs
    milliseconds, and every run offers the same tools again)."""
    key = json.dumps(schema, sort_keys=True, default=str)
    if key in _VALIDATORS:
        return _VALIDATORS[key]
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except (jsonschema.SchemaError, TypeError):
        validator = None  # an unusable schema: leave the judgement to the tool
    if len(_VALIDATORS) >= _CACHE_SIZE:
        _VALIDATORS.pop(next(iter(_VALIDATORS)))  # the oldest entry
    _VALIDATORS[key] = validator
    return validator


def validate_arguments(validator: Any, args: Mapping[str, Any]) -> str | None:
    """One line saying how ``args`` break the schema, or ``None``."""
    if validator is None:
        return None
    worst = best_match(validator.iter_errors(dict(args)))
    if worst is None:
        return None
    path = "/".join(str(p) for p in worst.absolute_path)
    at = f" at {path!r}" if path else ""
    message = " ".join(str(worst.message).split())
    if len(message) > 200:
        message = message[:197] + "..."
    return f"bad arguments{at}: {message}"


def _with_heartbeat(params: Mapping[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(json.dumps(params))  # a deep copy, as plain JSON
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})[HEARTBEAT] = dict(_HEARTBEAT_SCHEMA)
    required = [r for r in schema.get("required", []) if r != HEARTBEAT]
    schema["required"] = [*required, HEARTBEAT]
    return schema


class ToolSet:
    """The tools ``agent`` may call in a run, by name (attachment order)."""

    def __init__(self, agent: AgentRecord, specs: Iterable[ToolSpec]) -> None:
        self.agent = agent
        rules: dict[str, list[ToolRule]] = {}
        for rule in agent.tool_rules:
            rules.setdefault(rule.tool_name, []).append(rule)
        self.tools: dict[str, BoundTool] = {}
        memgpt = agent.agent_type == "memgpt_agent"
        for spec in specs:
            if spec.name in self.tools:
                continue
            if agent.agent_type == "react_agent" and spec.name in MEMORY_TOOLS:
                continue
            builtin = builtin_by_name(spec.name) if spec.tool_type != "custom" else None
            kinds = {r.type for r in rules.get(spec.name, ())}
            terminal = "exit_loop" in kinds or (
                builtin is not None and builtin.terminal and (memgpt or builtin.category != "core")
            )
            limits = [
                r.max_count_limit
                for r in rules.get(spec.name, ())
                if r.type == "max_count_per_step" and r.max_count_limit
            ]
            params = dict(spec.parameters)
            heartbeat = memgpt and not terminal
            schema = _with_heartbeat(params) if heartbeat else params
            self.tools[spec.name] = BoundTool(
                spec=spec,
                builtin=builtin,
                terminal=terminal,
                heartbeat=heartbeat,
                continues=bool(kinds & {"continue_loop", "constrain_child_tools", "conditional"})
                or (limits != [] and not terminal),
                max_count=min(limits) if limits else None,
                approval="requires_approval" in kinds or spec.default_requires_approval,
                schema=schema,
                validator=_validator(schema),
            )

        self.solver = RuleSolver(agent.tool_rules, self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def llm_tools(self, allowed: Iterable[str] | None = None) -> tuple[Tool, ...]:
        """The tools to offer: all of them, or those the rules allow now."""
        chosen = None if allowed is None else set(allowed)
        return tuple(
            tool.llm_tool() for tool in self.tools.values() if chosen is None or tool.name in chosen
        )

    def prepare(
        self, call: ToolCall, prefill: Mapping[str, Any] | None = None
    ) -> Prepared | Refused:
        """Check one call from the LLM; ``prefill`` (from the tool rules) overrides the
        model's values of the same arguments before the schema check."""
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            return Refused(
                f"invalid_tool_call: there is no tool named {call.name!r} (available: {known})"
            )
        args = call.input
        if args is None:
            return Refused(
                f"invalid_tool_call: the arguments of {call.name!r} are not a JSON object: "
                f"{_preview(call.arguments)}"
            )
        heartbeat = False
        if tool.heartbeat:
            value = args.get(HEARTBEAT)
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                value = value.strip().lower() == "true"
                args = {**args, HEARTBEAT: value}
            heartbeat = value is True
        if prefill:
            args = {**args, **prefill}
        problem = validate_arguments(tool.validator, args)
        if problem is not None:
            return Refused(f"invalid_tool_call: {call.name}: {problem}")
        args = {k: v for k, v in args.items() if k != HEARTBEAT or not tool.heartbeat}
        return Prepared(tool, args, heartbeat)


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 80 else text[:77] + "...")
